//! Every zip refusal rule, each naming the member and the rule.

use scifact_eval::{Dataset, Error, read_archive};
use zip::write::SimpleFileOptions;

use crate::util::{write_zip, zip_bytes};

const WANTED: &[&str] = &["mini/corpus.jsonl"];
const ALLOWED: &[&str] = &["mini/"];

fn refusal(bytes: Vec<u8>) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zip");
    std::fs::write(&path, bytes).unwrap();
    match read_archive(&path, WANTED, ALLOWED) {
        Err(Error::UnsafeMember { member, rule }) => (member, rule),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn refuses_unsafe_names_each_by_rule() {
    for (name, rule) in [
        ("/etc/passwd", "absolute"),
        ("mini/../../escape.txt", "'..'"),
        ("mini\\corpus.jsonl", "backslash"),
        ("C:/windows.txt", "drive"),
        ("mini/extra.txt", "not an expected member"),
    ] {
        let (member, got) = refusal(zip_bytes(&[("mini/corpus.jsonl", b"{}"), (name, b"x")]));
        assert_eq!(member, name);
        assert!(got.contains(rule), "{name}: {got}");
    }
}

#[test]
fn refuses_a_symlink_member() {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    writer.start_file("mini/corpus.jsonl", SimpleFileOptions::default()).unwrap();
    writer.add_symlink("mini/link", "/etc/passwd", SimpleFileOptions::default()).unwrap();
    let (member, rule) = refusal(writer.finish().unwrap().into_inner());
    assert_eq!(member, "mini/link");
    assert!(rule.contains("symbolic link"), "{rule}");
}

#[test]
fn refuses_duplicate_names() {
    // The zip writer refuses duplicates, so rename the second member in the bytes.
    let mut bytes = zip_bytes(&[("mini/corpus.jsonl", b"a"), ("mini/corpus.jsonX", b"b")]);
    let from = b"mini/corpus.jsonX";
    while let Some(at) = bytes.windows(from.len()).position(|w| w == from) {
        bytes[at + from.len() - 1] = b'l';
    }
    let (member, rule) = refusal(bytes);
    assert_eq!(member, "mini/corpus.jsonl");
    assert!(rule.contains("duplicate"), "{rule}");
}

#[test]
fn refuses_a_high_ratio_member_without_inflating_it() {
    let zeros = vec![0u8; 8 << 20];
    let (member, rule) = refusal(zip_bytes(&[("mini/corpus.jsonl", &zeros)]));
    assert_eq!(member, "mini/corpus.jsonl");
    assert!(rule.contains("compression ratio"), "{rule}");
}

/// Rewrites the uncompressed-size fields (local header offset 22, central directory offset 24) of the only member.
fn patch_declared_size(bytes: &mut [u8], size: u32) {
    for (signature, offset) in [(b"PK\x03\x04", 22usize), (b"PK\x01\x02", 24usize)] {
        let at = bytes.windows(4).position(|w| w == signature).unwrap();
        bytes[at + offset..at + offset + 4].copy_from_slice(&size.to_le_bytes());
    }
}

#[test]
fn refuses_a_bomb_declaring_a_huge_size() {
    let mut bytes = zip_bytes(&[("mini/corpus.jsonl", b"small")]);
    patch_declared_size(&mut bytes, 3_000_000_000);
    let (member, rule) = refusal(bytes);
    assert_eq!(member, "mini/corpus.jsonl");
    assert!(rule.contains("declared size") || rule.contains("ratio"), "{rule}");
}

/// A zip whose only member, `mini/corpus.jsonl`, declares 100 bytes and holds 2,900.
fn understated_zip(dir: &std::path::Path) -> std::path::PathBuf {
    let body = "a fairly ordinary line of text that compresses a little\n".repeat(50);
    let mut bytes = zip_bytes(&[("mini/corpus.jsonl", body.as_bytes())]);
    patch_declared_size(&mut bytes, 100);
    let path = dir.join("a.zip");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn a_member_larger_than_it_declares_is_refused_read_whole_or_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let path = understated_zip(dir.path());
    match read_archive(&path, WANTED, ALLOWED) {
        Err(Error::UnsafeMember { member, rule }) => {
            assert_eq!(member, "mini/corpus.jsonl");
            assert!(rule.contains("declared"), "{rule}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let mut dataset = Dataset::open_archive(&path, WANTED, ALLOWED).unwrap();
    match dataset.stream("mini/corpus.jsonl", |_| Ok(())) {
        Err(Error::UnsafeMember { member, rule }) => {
            assert_eq!(member, "mini/corpus.jsonl");
            assert!(rule.contains("declared"), "{rule}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_truncated_archive_is_a_zip_error_naming_the_file() {
    let bytes = zip_bytes(&[("mini/corpus.jsonl", b"{}")]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.zip");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let error = read_archive(&path, WANTED, ALLOWED).unwrap_err();
    assert!(matches!(error, Error::Zip { .. }), "{error}");
    assert!(error.to_string().contains("cut.zip"), "{error}");
}

#[test]
fn a_missing_member_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_zip(dir.path(), &[("mini/", b"")]);
    match read_archive(&path, WANTED, ALLOWED) {
        Err(Error::MissingMember { member }) => assert_eq!(member, "mini/corpus.jsonl"),
        other => panic!("expected MissingMember, got {other:?}"),
    }
}

#[test]
fn a_safe_archive_reads_and_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_zip(dir.path(), &[("mini/corpus.jsonl", b"{}\n")]);
    let contents = read_archive(&path, WANTED, ALLOWED).unwrap();
    assert_eq!(contents.members["mini/corpus.jsonl"], b"{}\n");
    assert_eq!(contents.sha256, scifact_eval::sha256_hex(&std::fs::read(&path).unwrap()));
    assert_eq!(contents.md5.len(), 32);
    assert!(std::fs::read_dir(dir.path()).unwrap().count() == 1, "nothing was extracted");
}

#[test]
fn a_streamed_member_is_hashed_whole_even_when_the_parser_stops_early() {
    let dir = tempfile::tempdir().unwrap();
    let body = b"{\"_id\": \"a\"}\n{\"_id\": \"b\"}\n";
    let path = write_zip(dir.path(), &[("mini/corpus.jsonl", body)]);
    let mut dataset = Dataset::open_archive(&path, WANTED, ALLOWED).unwrap();
    let first = dataset
        .stream("mini/corpus.jsonl", |reader| {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            Ok(line)
        })
        .unwrap();
    assert_eq!(first, "{\"_id\": \"a\"}\n");
    let digests = dataset.finish();
    assert_eq!(digests.members["mini/corpus.jsonl"], scifact_eval::sha256_hex(body));
    assert_eq!(digests.sha256, scifact_eval::sha256_hex(&std::fs::read(&path).unwrap()));
    assert_eq!(digests.bytes, std::fs::metadata(&path).unwrap().len());
}

#[test]
fn a_directory_reads_as_a_dataset_with_its_digest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("qrels")).unwrap();
    let files = [("corpus.jsonl", "{}\n"), ("queries.jsonl", "{}\n"), ("qrels/test.tsv", "h\n")];
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let mut dataset = Dataset::open_directory(dir.path(), "mini");
    dataset.stream("mini/corpus.jsonl", |_| Ok(())).unwrap();
    assert_eq!(dataset.read("mini/queries.jsonl").unwrap(), b"{}\n");
    dataset.read("mini/qrels/test.tsv").unwrap();
    let digests = dataset.finish();
    let listing: Vec<(String, String)> = files
        .iter()
        .map(|(name, text)| ((*name).to_owned(), scifact_eval::sha256_hex(text.as_bytes())))
        .collect();
    assert_eq!(digests.sha256, scifact_eval::directory_digest(&listing));
    assert_eq!(digests.sha256, scifact_eval::dataset_sha256(dir.path(), "mini", "test").unwrap());
    assert_eq!((digests.md5.as_str(), digests.bytes), ("", 8));
    assert_eq!(digests.members["mini/qrels/test.tsv"], scifact_eval::sha256_hex(b"h\n"));

    let mut missing = Dataset::open_directory(dir.path(), "mini");
    match missing.read("mini/qrels/dev.tsv") {
        Err(Error::MissingMember { member }) => assert_eq!(member, "mini/qrels/dev.tsv"),
        other => panic!("expected MissingMember, got {other:?}"),
    }
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("queries.jsonl.link")).unwrap();
    std::fs::rename(dir.path().join("queries.jsonl.link"), dir.path().join("queries.jsonl")).unwrap();
    match Dataset::open_directory(dir.path(), "mini").read("mini/queries.jsonl") {
        Err(Error::UnsafeMember { member, .. }) => assert_eq!(member, "mini/queries.jsonl"),
        other => panic!("expected a refusal of the symlink, got {other:?}"),
    }
}
