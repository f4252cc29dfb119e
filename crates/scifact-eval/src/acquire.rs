//! Downloading the archive: to a temp file, checked against BEIR's published md5 (or a digest the user
//! accepted explicitly), then renamed into place.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use crate::archive::{ArchiveDigests, ArchiveHasher, digests_of};
use crate::build::Progress;
use crate::error::{Error, Result};
use crate::fixture::DigestPolicy;

/// The md5 BEIR publishes for scifact.zip.
pub const SCIFACT_PUBLISHED_MD5: &str = "5f7d1de60b170fc8027bb7898e2efca1";

/// Judges archive bytes: the published md5 admits them; otherwise only `accept` (`sha256:<hex>`) matching
/// their sha256 does.
///
/// # Errors
/// [`Error::Download`] explaining both digests and how to accept them.
pub fn judge_download(
    url: &str,
    bytes: &[u8],
    published_md5: &str,
    accept: Option<&str>,
) -> Result<DigestPolicy> {
    let mut hasher = ArchiveHasher::default();
    hasher.update(bytes);
    judge(url, &hasher.finish(), published_md5, accept)
}

fn judge(
    url: &str,
    digests: &ArchiveDigests,
    published_md5: &str,
    accept: Option<&str>,
) -> Result<DigestPolicy> {
    let md5 = digests.md5.clone();
    if md5 == published_md5 {
        return Ok(DigestPolicy::DownloadMatchedPublishedMd5 { md5 });
    }
    let sha256 = format!("sha256:{}", digests.sha256);
    match accept {
        Some(accepted) if accepted.eq_ignore_ascii_case(&sha256) => {
            Ok(DigestPolicy::DownloadAcceptedSha256 { sha256 })
        }
        Some(accepted) => Err(Error::Download {
            url: url.to_owned(),
            reason: format!("{sha256} is not the accepted {accepted} (md5 {md5}, published {published_md5})"),
        }),
        None => Err(Error::Download {
            url: url.to_owned(),
            reason: format!(
                "md5 {md5} differs from the published {published_md5}; if you trust this file, rerun with \
                 --accept-archive-digest {sha256}"
            ),
        }),
    }
}

/// Downloads `url` to `dest` (streamed through a temp file, hashed on the way, fsync'd and renamed only when
/// admitted by [`judge_download`]'s rule). An existing `dest` that passes is reused without a download.
///
/// # Errors
/// [`Error::Download`] for network or HTTP failures and refused digests; [`Error::Io`].
pub fn fetch_archive(
    url: &str,
    dest: &Path,
    published_md5: &str,
    accept: Option<&str>,
    progress: &dyn Progress,
) -> Result<DigestPolicy> {
    if let Ok(existing) = std::fs::File::open(dest).and_then(|mut file| digests_of(&mut file))
        && let Ok(policy) = judge(url, &existing, published_md5, accept)
    {
        return Ok(policy);
    }
    let failed = |reason: String| Error::Download { url: url.to_owned(), reason };
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(20))
        .timeout(Duration::from_secs(3600))
        .build()
        .map_err(|error| failed(error.to_string()))?;
    let mut response = client.get(url).send().map_err(|error| failed(error.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status().as_u16())));
    }
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| Error::Io { path: parent.to_path_buf(), source })?;
    }
    progress.start("downloading archive", response.content_length().unwrap_or(0));
    let mut writer = safe_fs::AtomicWriter::create(dest)?;
    let mut hasher = ArchiveHasher::default();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let read = response.read(&mut buffer).map_err(|error| failed(error.to_string()))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        writer.write(&buffer[..read])?;
        progress.advance(read as u64);
    }
    progress.finish();
    // Refused, the writer is dropped uncommitted and its temp file removed.
    let policy = judge(url, &hasher.finish(), published_md5, accept)?;
    writer.commit()?;
    Ok(policy)
}
