//! Writes that never follow what an attacker planted, and reads that refuse anything but a capped regular
//! file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use safe_fs::{
    Error, Limits, hash_regular, publish_dir, read_regular, read_regular_in, staging_dir, write_atomically,
    write_new,
};

mod power_cut;

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

#[test]
fn an_atomic_write_replaces_a_planted_symlink_instead_of_writing_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let target = dir.path().join("verification.json");
    std::os::unix::fs::symlink(&victim, &target).unwrap();
    write_atomically(&target, b"report").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(target.symlink_metadata().unwrap().file_type().is_file());
    assert_eq!(std::fs::read(&target).unwrap(), b"report");
}

#[test]
fn temp_files_a_killed_writer_left_are_removed_and_nothing_else_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("a.json");
    std::fs::write(dir.path().join(".a.json.partial-XYZ"), b"torn").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join(".a.json.partial-link")).unwrap();
    std::fs::write(dir.path().join(".b.json.partial-XYZ"), b"other").unwrap();
    write_atomically(&target, b"whole").unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [".b.json.partial-XYZ", "a.json"]);
}

#[test]
fn write_new_never_overwrites_not_even_a_dangling_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    write_new(&path, b"one").unwrap();
    assert!(matches!(write_new(&path, b"two"), Err(Error::Exists { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), b"one");
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    assert!(matches!(write_new(&dangling, b"x"), Err(Error::Exists { .. })));
    assert!(!dir.path().join("nowhere").exists());
}

#[test]
fn a_staged_directory_appears_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let destination = dir.path().join("bundle");
    let stale = staging_dir(&destination).unwrap();
    std::fs::write(stale.path().join("half"), b"x").unwrap();
    let stale_path = stale.keep();
    let staging = staging_dir(&destination).unwrap();
    assert!(!stale_path.exists(), "a killed writer's staging directory is removed");
    write_atomically(&staging.path().join("manifest.json"), b"{}").unwrap();
    publish_dir(staging, &destination).unwrap();
    assert_eq!(std::fs::read(destination.join("manifest.json")).unwrap(), b"{}");
    let again = staging_dir(&destination).unwrap();
    assert!(matches!(publish_dir(again, &destination), Err(Error::Exists { .. })));
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "no staging directory is left behind");
}

#[test]
fn reads_refuse_symlinks_fifos_devices_and_directories_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let regular = dir.path().join("regular");
    std::fs::write(&regular, b"data").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&regular, &link).unwrap();
    let zero = dir.path().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    assert_eq!(read_regular(&regular, 100).unwrap(), b"data");
    assert!(matches!(read_regular(&link, 100), Err(Error::Symlink { .. })));
    assert!(matches!(read_regular(&zero, 100), Err(Error::Symlink { .. })));
    assert!(matches!(read_regular(&fifo, 100), Err(Error::NotRegular { kind: "FIFO", .. })));
    assert!(matches!(
        read_regular(Path::new("/dev/zero"), 100),
        Err(Error::NotRegular { kind: "character device", .. })
    ));
    assert!(matches!(read_regular(dir.path(), 100), Err(Error::NotRegular { kind: "directory", .. })));
    assert!(read_regular(&dir.path().join("absent"), 100).unwrap_err().is_not_found());
    assert!(matches!(hash_regular(&fifo, 100), Err(Error::NotRegular { .. })));
}

#[test]
fn caps_refuse_a_large_file_before_reading_it_and_bound_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let sparse = dir.path().join("sparse");
    std::fs::File::create(&sparse).unwrap().set_len(2 << 30).unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(read_regular(&sparse, 1 << 20), Err(Error::TooLarge { size, .. }) if size == 2 << 30));
    assert!(matches!(hash_regular(&sparse, 1 << 20), Err(Error::TooLarge { .. })));
    assert!(started.elapsed().as_secs() < 2, "refused without reading");
    let small = dir.path().join("small");
    std::fs::write(&small, vec![7u8; 600]).unwrap();
    let limits = Limits { max_file_bytes: 1000, max_total_bytes: 1000 };
    let mut total = 0;
    read_regular_in(&small, limits, &mut total).unwrap();
    assert_eq!(total, 600);
    assert!(matches!(
        read_regular_in(&small, limits, &mut total),
        Err(Error::TotalTooLarge { total: 1200, .. })
    ));
    let (hex, length) = hash_regular(&small, 1000).unwrap();
    assert_eq!(length, 600);
    assert_eq!(hex.len(), 64);
}
