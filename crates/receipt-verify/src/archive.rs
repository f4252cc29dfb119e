//! The public archive (SciFact's, or another dataset's in BEIR's layout), read by this verifier's own code to
//! recompute what a bundle's signer cannot fake: the texts behind every lexical score and every embedding. A
//! zip is accepted only when its sha256 is the one the bundle records (so it is BEIR's file, not the signer's),
//! a directory only when its digest is; the three members are streamed line by line within caps and parsed:
//! `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{hex, sha256_tagged};
use crate::found::PrivateCopy;
use crate::names::MAX_ARCHIVE_BYTES;
use crate::texts::Texts;

/// The largest member read: 16 GiB (msmarco's corpus, BEIR's largest, is 3.2 GB; a member is streamed, so
/// memory follows what is kept of it).
const MAX_MEMBER_BYTES: u64 = 16 << 30;
/// The longest line read: 64 MiB.
const MAX_LINE_BYTES: u64 = 64 << 20;

/// What the archive holds that a recomputation needs.
#[derive(Debug, Clone)]
pub struct Archive {
    /// `sha256:` of the archive file.
    pub sha256: String,
    /// md5 (hex) of the archive file, as BEIR publishes its zips' digests; `None` for a directory, which is
    /// never BEIR's file.
    pub md5: Option<String>,
    /// Every document in corpus order, and the queries `query_ids` asked for, in that order.
    pub texts: Texts,
    /// Test judgements: query id to document id to grade.
    pub qrels: BTreeMap<String, BTreeMap<String, i64>>,
}

/// Which members of an archive hold the dataset: those under `prefix/`, and the judgements of `split`; and how
/// much of them the fixture says there is. A corpus or a qrels file with more is refused at the first line past
/// the fixture's count, so this reader never holds more than the fixture it is compared with (a small zip of
/// billions of tiny lines, whose digest a hostile signer recorded, does not exhaust memory).
#[derive(Debug, Clone, Copy)]
pub struct Members<'a> {
    /// The dataset's folder (the fixture's profile).
    pub prefix: &'a str,
    /// The qrels split (`qrels/<split>.tsv`).
    pub split: &'a str,
    /// The fixture's document count.
    pub documents: usize,
    /// The fixture's judgement count.
    pub qrels: usize,
}

/// Largest compression ratio accepted for a member (uncompressed / compressed), the runner's: JSON text
/// compresses about 3-5x; ratios in the hundreds are how zip bombs look.
const MAX_RATIO: u64 = 100;

/// Reads the archive at `path` if its sha256 is `expected` (`sha256:<hex>`), taking the `members` and the
/// queries `query_ids`, in that order.
///
/// # Errors
/// Why the archive is not the recorded one, or a member is missing, over its cap, or does not parse (naming
/// the member and line).
pub fn read(path: &Path, expected: &str, members: &Members, query_ids: &[String]) -> Result<Archive, String> {
    let Members { prefix, split, documents: most_documents, qrels: most_qrels } = *members;
    let wanted: std::collections::HashSet<&str> = query_ids.iter().map(String::as_str).collect();
    let mismatch = |sha256: &str| {
        format!(
            "--archive {} hashes to {sha256}, the bundle records {expected}: not the archive the run read",
            path.display()
        )
    };
    let mut source = if path.is_dir() {
        Source::Directory { dir: path }
    } else {
        // Read from a private copy, so the members parsed are those of the bytes hashed.
        let copy = PrivateCopy::of(path, MAX_ARCHIVE_BYTES).map_err(|reason| match reason {
            Some(reason) => format!("--archive: {reason}"),
            None => format!("--archive: {} is not present", path.display()),
        })?;
        if copy.sha256 != expected {
            return Err(mismatch(&copy.sha256));
        }
        let mut file =
            std::fs::File::open(&copy.path).map_err(|e| format!("--archive {}: {e}", path.display()))?;
        let md5 = md5_of(&mut file).map_err(|e| format!("--archive {}: {e}", path.display()))?;
        let zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| format!("--archive: {e}"))?;
        Source::Zip { zip, prefix, md5, _copy: copy }
    };
    let corpus_name = format!("{prefix}/corpus.jsonl");
    let queries_name = format!("{prefix}/queries.jsonl");
    let qrels_name = format!("{prefix}/qrels/{split}.tsv");
    // A directory's digest is the runner's: `sha256:` over `<path> NUL <hex sha256> LF` of each file read, in
    // the order read.
    let mut listing = String::new();
    let mut listed = |name: &str, sha256: String| listing.push_str(&format!("{name}\0{sha256}\n"));
    let mut documents = Vec::new();
    let corpus_sha256 = source.lines("corpus.jsonl", &mut |line, text| {
        let value = json(&corpus_name, line, text)?;
        let id = id_of(&value).ok_or_else(|| format!("{corpus_name} line {line}: no _id"))?;
        if documents.len() == most_documents {
            return Err(format!(
                "{corpus_name} line {line}: more documents than the fixture's {most_documents}"
            ));
        }
        let field = |key: &str| value[key].as_str().unwrap_or("").to_owned();
        documents.push((id, field("title"), field("text")));
        Ok(())
    })?;
    listed("corpus.jsonl", corpus_sha256);
    let mut by_id: BTreeMap<String, String> = BTreeMap::new();
    let queries_sha256 = source.lines("queries.jsonl", &mut |line, text| {
        let value = json(&queries_name, line, text)?;
        let id = id_of(&value).ok_or_else(|| format!("{queries_name} line {line}: no _id"))?;
        let text = value["text"].as_str().ok_or_else(|| format!("{queries_name} line {line}: no text"))?;
        // Only the queries the fixture asks for are kept (queries.jsonl holds every split's).
        if wanted.contains(id.as_str()) {
            by_id.insert(id, text.to_owned());
        }
        Ok(())
    })?;
    listed("queries.jsonl", queries_sha256);
    let mut qrels: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let mut header = true;
    let mut judgements = 0usize;
    let qrels_file = format!("qrels/{split}.tsv");
    let qrels_sha256 = source.lines(&qrels_file, &mut |index, line| {
        if std::mem::take(&mut header) {
            return Ok(());
        }
        if judgements == most_qrels {
            return Err(format!(
                "{qrels_name} line {index}: more judgements than the fixture's {most_qrels}"
            ));
        }
        judgements += 1;
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [query, document, grade] = fields[..] else {
            return Err(format!("{qrels_name} line {index}: {} fields, not 3", fields.len()));
        };
        let grade =
            grade.parse::<i64>().map_err(|_| format!("{qrels_name} line {index}: grade {grade:?}"))?;
        qrels.entry(query.to_owned()).or_default().insert(document.to_owned(), grade);
        Ok(())
    })?;
    listed(&qrels_file, qrels_sha256);
    let (sha256, md5) = match source {
        Source::Zip { md5, .. } => (expected.to_owned(), Some(md5)),
        Source::Directory { .. } => (sha256_tagged(listing.as_bytes()), None),
    };
    if sha256 != expected {
        return Err(mismatch(&sha256));
    }
    let mut chosen = Vec::with_capacity(query_ids.len());
    for id in query_ids {
        let text = by_id.get(id).ok_or_else(|| format!("{queries_name} has no query {id:?}"))?;
        chosen.push((id.clone(), text.clone()));
    }
    for id in query_ids {
        qrels.entry(id.clone()).or_default();
    }
    Ok(Archive { sha256, md5, texts: Texts { documents, queries: chosen }, qrels })
}

/// The md5 (hex) of `file` from its start, leaving it at its start again.
fn md5_of(file: &mut std::fs::File) -> std::io::Result<String> {
    use md5::Digest;
    use std::io::{Read, Seek};
    let mut hasher = md5::Md5::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    file.rewind()?;
    Ok(hex(&hasher.finalize()))
}

/// Where the three files come from: a zip whose digest already matched (read from its private copy), or a
/// directory.
enum Source<'a> {
    Zip { zip: zip::ZipArchive<BufReader<std::fs::File>>, prefix: &'a str, md5: String, _copy: PrivateCopy },
    Directory { dir: &'a Path },
}

impl Source<'_> {
    /// Streams the file `name` (relative to the dataset's folder) and hands each non-blank line to `each` with
    /// its 1-based number: UTF-8 checked, a leading byte-order mark and a carriage return before the newline
    /// dropped. Returns the file's sha256 (hex).
    fn lines(
        &mut self,
        name: &str,
        each: &mut dyn FnMut(usize, &str) -> Result<(), String>,
    ) -> Result<String, String> {
        let (label, reader): (String, Box<dyn Read + '_>) = match self {
            Source::Zip { zip, prefix, .. } => {
                let label = format!("--archive member {prefix}/{name}");
                let file = zip.by_name(&format!("{prefix}/{name}")).map_err(|e| format!("{label}: {e}"))?;
                if file.size() > MAX_MEMBER_BYTES {
                    return Err(format!("{label} declares {} bytes, over {MAX_MEMBER_BYTES}", file.size()));
                }
                let ratio = file.size() / file.compressed_size().max(1);
                if ratio > MAX_RATIO {
                    return Err(format!("{label}: compression ratio {ratio}, over the cap of {MAX_RATIO}"));
                }
                (label, Box::new(file.take(MAX_MEMBER_BYTES + 1)))
            }
            Source::Directory { dir } => {
                let label = format!("--archive {}: {name}", dir.display());
                let (file, _) = safe_fs::open_regular_capped(&dir.join(name), MAX_MEMBER_BYTES)
                    .map_err(|e| format!("{label}: {e}"))?;
                (label, Box::new(file.take(MAX_MEMBER_BYTES + 1)))
            }
        };
        let mut hashed = Hashed { inner: reader, hasher: Sha256::new(), count: 0 };
        let mut reader = BufReader::with_capacity(1 << 20, &mut hashed);
        let mut buffer = Vec::new();
        let mut number = 0;
        loop {
            buffer.clear();
            let read = (&mut reader)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut buffer)
                .map_err(|e| format!("{label}: {e}"))?;
            if read == 0 {
                break;
            }
            number += 1;
            let mut line = buffer.as_slice();
            match line.strip_suffix(b"\n") {
                Some(rest) => line = rest.strip_suffix(b"\r").unwrap_or(rest),
                None if buffer.len() as u64 > MAX_LINE_BYTES => {
                    return Err(format!("{label} line {number}: longer than {MAX_LINE_BYTES} bytes"));
                }
                None => {}
            }
            if number == 1 {
                line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
            }
            let text = std::str::from_utf8(line).map_err(|_| format!("{label} line {number}: not UTF-8"))?;
            if !text.trim().is_empty() {
                each(number, text)?;
            }
        }
        drop(reader);
        let Hashed { inner, hasher, count } = hashed;
        drop(inner);
        if count > MAX_MEMBER_BYTES {
            return Err(format!("{label}: over {MAX_MEMBER_BYTES} bytes"));
        }
        Ok(hex(&hasher.finalize()))
    }
}

/// Counts and hashes what passes through it.
struct Hashed<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> Read for Hashed<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.hasher.update(&buffer[..read]);
        self.count += read as u64;
        Ok(read)
    }
}

fn json(name: &str, line: usize, text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{name} line {line}: {e}"))
}

/// A BEIR `_id`: a string, or a number written as one.
fn id_of(value: &Value) -> Option<String> {
    match &value["_id"] {
        Value::String(id) if !id.is_empty() => Some(id.clone()),
        Value::Number(n) => n.as_u64().map(|n| n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{MAX_LINE_BYTES, Members, read};
    use crate::canonical::{sha256_hex, sha256_tagged};

    const CORPUS: &str =
        "\u{feff}{\"_id\": 7, \"title\": \"T\", \"text\": \"x\"}\r\n\n{\"_id\": \"b\", \"text\": \"y\"}\n";
    const QUERIES: &str = "{\"_id\": \"q\", \"text\": \"what\"}\n";
    const QRELS: &str = "query-id\tcorpus-id\tscore\r\nq\t7\t2\n";
    const MEMBERS: Members = Members { prefix: "mini", split: "test", documents: 2, qrels: 1 };

    fn directory(corpus: &[u8]) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("qrels")).unwrap();
        let files: [(&str, &[u8]); 3] = [
            ("corpus.jsonl", corpus),
            ("queries.jsonl", QUERIES.as_bytes()),
            ("qrels/test.tsv", QRELS.as_bytes()),
        ];
        let mut listing = String::new();
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
            listing.push_str(&format!("{name}\0{}\n", sha256_hex(bytes)));
        }
        (dir, sha256_tagged(listing.as_bytes()))
    }

    #[test]
    fn a_zip_and_its_directory_read_alike() {
        let (dir, digest) = directory(CORPUS.as_bytes());
        let from_dir = read(dir.path(), &digest, &MEMBERS, &["q".to_owned()]).unwrap();
        assert_eq!(
            from_dir.texts.documents,
            [("7".into(), "T".into(), "x".into()), ("b".into(), String::new(), "y".into())]
        );
        assert_eq!(from_dir.qrels["q"]["7"], 2);

        let path = dir.path().join("mini.zip");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        for (name, text) in [("corpus.jsonl", CORPUS), ("queries.jsonl", QUERIES), ("qrels/test.tsv", QRELS)]
        {
            zip.start_file(format!("mini/{name}"), zip::write::SimpleFileOptions::default()).unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
        let zip_digest = sha256_tagged(&std::fs::read(&path).unwrap());
        let from_zip = read(&path, &zip_digest, &MEMBERS, &["q".to_owned()]).unwrap();
        assert_eq!(from_zip.texts.documents, from_dir.texts.documents);
        assert_eq!(from_zip.texts.queries, from_dir.texts.queries);
        assert_eq!(from_zip.qrels, from_dir.qrels);

        let error = read(&path, &digest, &MEMBERS, &["q".to_owned()]).unwrap_err();
        assert!(error.contains("not the archive the run read"), "{error}");
    }

    #[test]
    fn a_changed_directory_file_or_an_overlong_line_is_refused() {
        let (dir, digest) = directory(CORPUS.as_bytes());
        std::fs::write(dir.path().join("queries.jsonl"), "{\"_id\": \"q\", \"text\": \"other\"}\n").unwrap();
        let error = read(dir.path(), &digest, &MEMBERS, &["q".to_owned()]).unwrap_err();
        assert!(error.contains("not the archive the run read"), "{error}");

        let mut long = b"{\"_id\": \"a\"}\n".to_vec();
        long.resize(long.len() + MAX_LINE_BYTES as usize + 1, b' ');
        let (dir, digest) = directory(&long);
        let error = read(dir.path(), &digest, &MEMBERS, &["q".to_owned()]).unwrap_err();
        assert!(error.contains("corpus.jsonl line 2: longer than"), "{error}");
    }

    #[test]
    fn no_more_is_held_than_the_fixture_holds_and_a_bomb_is_refused_by_its_ratio() {
        let (dir, digest) = directory(CORPUS.as_bytes());
        let fewer = Members { documents: 1, ..MEMBERS };
        let error = read(dir.path(), &digest, &fewer, &["q".to_owned()]).unwrap_err();
        assert!(error.contains("corpus.jsonl line 3: more documents than the fixture's 1"), "{error}");
        let error =
            read(dir.path(), &digest, &Members { qrels: 0, ..MEMBERS }, &["q".to_owned()]).unwrap_err();
        assert!(error.contains("more judgements than the fixture's 0"), "{error}");

        let path = dir.path().join("bomb.zip");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let deflated =
            zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("mini/corpus.jsonl", deflated).unwrap();
        std::io::Write::write_all(&mut zip, &vec![b'\n'; 8 << 20]).unwrap();
        zip.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let error = read(&path, &sha256_tagged(&bytes), &MEMBERS, &["q".to_owned()]).unwrap_err();
        assert!(error.contains("compression ratio"), "{error}");
    }
}
