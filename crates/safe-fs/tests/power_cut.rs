//! Crash-safe writes against a power cut, not a kill: every sync is recorded ([`safe_fs::durable`]), and the
//! directory is rebuilt as a power cut after each one would have left it. At every such point a file written
//! atomically holds its old bytes or its new ones, whole; once the write has returned, the new ones.

use std::path::Path;

use safe_fs::durable::{Found, Image, Recording};
use safe_fs::{publish_dir, staging_dir, write_atomically, write_new};

/// Every image holds `before` or `after` at `path` (`None`: no file), and the last one `after`.
fn old_or_new_then_new(images: &[Image], path: &Path, before: Option<&[u8]>, after: &[u8]) {
    let expect = |bytes: Option<&[u8]>| bytes.map_or(Found::Missing, |b| Found::Bytes(b.to_vec()));
    for image in images {
        let found = image.file(path);
        assert!(
            found == expect(before) || found == expect(Some(after)),
            "after {} syncs a power cut leaves {found:?} at {}",
            image.syncs(),
            path.display()
        );
    }
    let last = images.last().unwrap();
    assert_eq!(
        last.file(path),
        expect(Some(after)),
        "once the write returned ({} syncs), a power cut must leave the new bytes",
        last.syncs()
    );
}

#[test]
fn an_atomic_replace_survives_a_power_cut_after_any_sync() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("verification.json");
    std::fs::write(&path, b"old report").unwrap();
    let recording = Recording::start(dir.path()).unwrap();
    write_atomically(&path, b"new report").unwrap();
    let images = recording.images();
    // The temp file's bytes, then the directory's new entry.
    assert!(images.len() >= 3, "{} images", images.len());
    old_or_new_then_new(&images, &path, Some(b"old report"), b"new report");
}

#[test]
fn a_new_file_survives_a_power_cut_once_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret.key");
    let recording = Recording::start(dir.path()).unwrap();
    write_new(&path, b"key bytes").unwrap();
    old_or_new_then_new(&recording.images(), &path, None, b"key bytes");
}

#[test]
fn a_published_directory_is_whole_after_a_power_cut_once_published() {
    let dir = tempfile::tempdir().unwrap();
    let destination = dir.path().join("bundle");
    let recording = Recording::start(dir.path()).unwrap();
    let staging = staging_dir(&destination).unwrap();
    write_atomically(&staging.path().join("manifest.json"), b"{}").unwrap();
    write_atomically(&staging.path().join("rows.jsonl"), b"row\n").unwrap();
    // A file whose bytes its writer synced, but not its name: publishing makes the name durable.
    let page = staging.path().join("report.html");
    let mut file = std::fs::File::create(&page).unwrap();
    std::io::Write::write_all(&mut file, b"<p>").unwrap();
    safe_fs::durable::sync_all(&file, &page).unwrap();
    publish_dir(staging, &destination).unwrap();
    let images = recording.images();
    for image in &images {
        // Whole or absent: never a bundle directory with a file missing or unsynced.
        let names = image.names(&destination);
        if !names.is_empty() || image.file(&destination.join("manifest.json")) != Found::Missing {
            assert_eq!(image.file(&destination.join("manifest.json")), Found::Bytes(b"{}".to_vec()));
            assert_eq!(image.file(&destination.join("rows.jsonl")), Found::Bytes(b"row\n".to_vec()));
            assert_eq!(image.file(&destination.join("report.html")), Found::Bytes(b"<p>".to_vec()));
        }
    }
    let last = images.last().unwrap();
    assert_eq!(
        last.names(&destination),
        ["manifest.json", "report.html", "rows.jsonl"],
        "published means durable"
    );
    assert_eq!(last.file(&destination.join("rows.jsonl")), Found::Bytes(b"row\n".to_vec()));
}

#[test]
fn the_model_loses_what_was_never_synced() {
    // The replay itself can fail: a file created and written without any sync is not in any image.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unsynced");
    let recording = Recording::start(dir.path()).unwrap();
    std::fs::write(&path, b"bytes").unwrap();
    let images = recording.images();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].file(&path), Found::Missing);
    // Its directory synced, but not its bytes: the name survives, the content is anyone's guess.
    let dir2 = tempfile::tempdir().unwrap();
    let path2 = dir2.path().join("named");
    let recording = Recording::start(dir2.path()).unwrap();
    std::fs::write(&path2, b"bytes").unwrap();
    safe_fs::durable::sync_dir(dir2.path()).unwrap();
    assert_eq!(recording.images().last().unwrap().file(&path2), Found::Unsynced);
}
