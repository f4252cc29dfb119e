//! Finding the model on disk, or fetching its pinned files once into the user's cache.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::sentence_bert::{ALL_MINILM_L6_V2_WEIGHTS_SHA256, MODEL_FILES};
use crate::sha256_hex;

/// Where all-MiniLM-L6-v2's files are published. The files are pinned by content (sha256), so the
/// revision in the URL only says where to look, not what is accepted.
pub const ALL_MINILM_L6_V2_BASE_URL: &str =
    "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main";

/// A file to fetch and the only content accepted for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedFile {
    /// File name, relative to the base URL and to the destination directory.
    pub name: String,
    /// Lowercase hex sha256 the file must have.
    pub sha256: String,
}

/// The pinned files of all-MiniLM-L6-v2 (digests of the published files).
pub fn all_minilm_l6_v2_files() -> Vec<PinnedFile> {
    let pins = [
        ALL_MINILM_L6_V2_WEIGHTS_SHA256,
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ];
    MODEL_FILES
        .iter()
        .zip(pins)
        .map(|(name, sha256)| PinnedFile { name: (*name).into(), sha256: sha256.into() })
        .collect()
}

/// The cache directory the model is downloaded into: `$XDG_CACHE_HOME` or `~/.cache`, then
/// `scifact-audit/all-MiniLM-L6-v2`.
pub fn model_cache_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(cache.join("scifact-audit").join("all-MiniLM-L6-v2"))
}

/// Fetches every file of `files` from `base_url` into `dest`, skipping those already present with the right
/// digest. Each file is checked before it is written, and written to a temp file, fsync'd and renamed, so
/// `dest` never holds a partial or unverified file.
///
/// # Errors
/// [`Error::Download`] for a network failure, an HTTP error or a digest mismatch; [`Error::Io`].
pub fn download_pinned(base_url: &str, files: &[PinnedFile], dest: &Path) -> Result<()> {
    // The directories this call creates, deepest first: removed again when the download leaves them empty.
    let fresh: Vec<PathBuf> =
        dest.ancestors().take_while(|dir| dir.symlink_metadata().is_err()).map(Path::to_path_buf).collect();
    let result = download_into(base_url, files, dest);
    if result.is_err() {
        for dir in &fresh {
            // Only an empty directory goes; the first that is not ends it.
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
    result
}

fn download_into(base_url: &str, files: &[PinnedFile], dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|source| Error::Io { path: dest.to_path_buf(), source })?;
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(|error| Error::Download { url: base_url.to_owned(), reason: error.to_string() })?;
    for file in files {
        let target = dest.join(&file.name);
        if std::fs::read(&target).is_ok_and(|bytes| sha256_hex(&bytes) == file.sha256) {
            continue;
        }
        let url = format!("{}/{}", base_url.trim_end_matches('/'), file.name);
        let failed = |reason: String| Error::Download { url: url.clone(), reason };
        let response = client.get(&url).send().map_err(|error| failed(error.to_string()))?;
        if !response.status().is_success() {
            return Err(failed(format!("HTTP {}", response.status().as_u16())));
        }
        let bytes = response.bytes().map_err(|error| failed(error.to_string()))?;
        let actual = sha256_hex(&bytes);
        if actual != file.sha256 {
            return Err(failed(format!("sha256 is {actual}, pinned {}", file.sha256)));
        }
        safe_fs::write_atomically(&target, &bytes).map_err(|error| Error::Io {
            path: target.clone(),
            source: std::io::Error::other(error.to_string()),
        })?;
    }
    Ok(())
}
