//! Fetching pinned model files: verified before they are written, never left half-written.

use embedding::{Error, PinnedFile, all_minilm_l6_v2_files, download_pinned, is_model_dir};

use crate::http::{Request, serve};

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn server() -> String {
    serve(|request: &Request| match request.path.as_str() {
        "/model.safetensors" => (200, "application/octet-stream", b"weights".to_vec()),
        "/tokenizer.json" => (200, "application/json", b"{}".to_vec()),
        "/config.json" => (200, "application/json", b"{\"a\":1}".to_vec()),
        _ => (404, "text/plain", b"no".to_vec()),
    })
}

fn pins() -> Vec<PinnedFile> {
    [("model.safetensors", &b"weights"[..]), ("tokenizer.json", b"{}"), ("config.json", b"{\"a\":1}")]
        .iter()
        .map(|(name, bytes)| PinnedFile { name: (*name).into(), sha256: sha256(bytes) })
        .collect()
}

#[test]
fn downloads_and_verifies_every_pinned_file() {
    let dir = tempfile::tempdir().unwrap();
    download_pinned(&server(), &pins(), dir.path()).unwrap();
    assert!(is_model_dir(dir.path()));
    assert_eq!(std::fs::read(dir.path().join("model.safetensors")).unwrap(), b"weights");
    // A second call finds the files in place and does not need the server.
    download_pinned("http://127.0.0.1:9", &pins(), dir.path()).unwrap();
}

#[test]
fn a_digest_mismatch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut pins = pins();
    pins[1].sha256 = "0".repeat(64);
    match download_pinned(&server(), &pins, dir.path()) {
        Err(Error::Download { url, reason }) => {
            assert!(url.ends_with("/tokenizer.json"), "{url}");
            assert!(reason.contains("pinned"), "{reason}");
        }
        other => panic!("expected a download error, got {other:?}"),
    }
    assert!(!dir.path().join("tokenizer.json").exists());
    // The first file was verified and kept; nothing else, not even a hidden temp file, is left.
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into())
        .collect();
    left.sort();
    assert_eq!(left, ["model.safetensors"]);
}

#[test]
fn an_http_error_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let pins = vec![PinnedFile { name: "missing.bin".into(), sha256: "0".repeat(64) }];
    let error = download_pinned(&server(), &pins, dir.path()).unwrap_err().to_string();
    assert!(error.contains("missing.bin") && error.contains("404"), "{error}");
}

#[test]
#[ignore = "needs SCIFACT_MODEL_DIR (or ../shared/models/all-MiniLM-L6-v2)"]
fn the_real_model_is_pinned_by_the_digests_of_its_files() {
    let dir = crate::parity::model_dir();
    let files = all_minilm_l6_v2_files();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, vec!["model.safetensors", "tokenizer.json", "config.json"]);
    for file in &files {
        let path = dir.join(&file.name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(sha256(&bytes), file.sha256, "{}", path.display());
    }
}

/// A download that fails leaves no empty cache directory behind it (a later look for the cache must not find
/// one), and never removes a directory that was there before it.
#[test]
fn a_failed_download_leaves_no_directory_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache").join("scifact-audit").join("all-MiniLM-L6-v2");
    assert!(download_pinned("http://127.0.0.1:9", &pins(), &cache).is_err());
    assert!(!dir.path().join("cache").exists(), "the failed download left its directories");
    assert!(dir.path().exists());
    // A directory that existed stays, empty or not.
    std::fs::create_dir(dir.path().join("kept")).unwrap();
    assert!(download_pinned("http://127.0.0.1:9", &pins(), &dir.path().join("kept")).is_err());
    assert!(dir.path().join("kept").is_dir());
}
