//! Reading the BEIR archive safely: every member is checked against path, type, size, ratio and membership
//! rules before any byte is decompressed, and members are read into memory, never extracted to disk.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::Path;

use md5::Md5;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Largest uncompressed size accepted for one member: 2 GiB (SciFact's corpus is 8 MB, a generated million
/// documents' about 230 MB).
pub const MAX_MEMBER_BYTES: u64 = 2 << 30;
/// Largest uncompressed size accepted for the members read from an archive: 4 GiB.
pub const MAX_TOTAL_BYTES: u64 = 4 << 30;
/// Largest compression ratio accepted for a member (uncompressed / compressed): 100. JSON text compresses
/// about 3-5x; ratios in the hundreds are how zip bombs look.
pub const MAX_RATIO: u64 = 100;

/// An archive read into memory, with the hashes receipts record.
#[derive(Debug, Clone)]
pub struct ArchiveContents {
    /// Member name to bytes, for the members that were asked for.
    pub members: BTreeMap<String, Vec<u8>>,
    /// Lowercase hex sha256 of the archive file.
    pub sha256: String,
    /// Lowercase hex md5 of the archive file (BEIR publishes md5).
    pub md5: String,
    /// Archive size in bytes.
    pub bytes: u64,
}

/// Checks one member name: relative, forward slashes only, no `..`, no drive letter, no NUL.
fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty name");
    }
    if name.contains('\0') {
        return Err("NUL byte in name");
    }
    if name.contains('\\') {
        return Err("backslash in name (only '/' separates components)");
    }
    if name.starts_with('/') {
        return Err("absolute path");
    }
    let bytes = name.as_bytes();
    if bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic() {
        return Err("drive letter");
    }
    if name.split('/').any(|component| component == "..") {
        return Err("parent-directory component '..'");
    }
    Ok(())
}

/// Opens `path`, checks every member, and returns the bytes of each member in `wanted`. Members in `allowed`
/// (directories, unused files) may be present; any other member refuses the whole archive.
///
/// # Errors
/// [`Error::Io`], [`Error::Zip`] for a truncated or corrupt archive, [`Error::UnsafeMember`] naming the member
/// and rule, [`Error::MissingMember`].
pub fn read_archive(path: &Path, wanted: &[&str], allowed: &[&str]) -> Result<ArchiveContents> {
    let raw = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let sha256 = Sha256::digest(&raw).iter().map(|b| format!("{b:02x}")).collect();
    let md5 = Md5::digest(&raw).iter().map(|b| format!("{b:02x}")).collect();
    let bytes = raw.len() as u64;
    let refuse = |member: &str, rule: String| Error::UnsafeMember { member: member.to_owned(), rule };
    // The zip reader keeps only one entry per name, so duplicates are looked for in the raw directory.
    if let Some(names) = central_directory_names(&raw) {
        let mut seen = HashSet::new();
        for name in names {
            let name = String::from_utf8_lossy(&name).into_owned();
            if !seen.insert(name.clone()) {
                return Err(refuse(&name, "duplicate member name".into()));
            }
        }
    }
    let zip_error =
        |error: zip::result::ZipError| Error::Zip { path: path.to_path_buf(), reason: error.to_string() };
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(raw)).map_err(zip_error)?;
    let mut seen = HashSet::new();
    let mut declared_total = 0u64;
    // First pass: metadata only, nothing decompressed.
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(zip_error)?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        check_name(&name).map_err(|rule| refuse(&name, rule.to_owned()))?;
        if !seen.insert(name.clone()) {
            return Err(refuse(&name, "duplicate member name".into()));
        }
        if entry.is_symlink() {
            return Err(refuse(&name, "symbolic link".into()));
        }
        if !wanted.contains(&name.as_str()) && !allowed.contains(&name.as_str()) {
            return Err(refuse(&name, format!("not an expected member (expected {wanted:?})")));
        }
        let size = entry.size();
        if size > MAX_MEMBER_BYTES {
            return Err(refuse(
                &name,
                format!("declared size {size} bytes exceeds the {MAX_MEMBER_BYTES}-byte cap"),
            ));
        }
        let compressed = entry.compressed_size().max(1);
        if size / compressed > MAX_RATIO {
            return Err(refuse(
                &name,
                format!("compression ratio {} exceeds the cap of {MAX_RATIO}", size / compressed),
            ));
        }
        // Only what is read counts toward the total: a member merely allowed (another forum) is never
        // decompressed.
        if wanted.contains(&name.as_str()) {
            declared_total += size;
        }
        if declared_total > MAX_TOTAL_BYTES {
            return Err(refuse(&name, format!("archive total exceeds the {MAX_TOTAL_BYTES}-byte cap")));
        }
    }
    let mut members = BTreeMap::new();
    for name in wanted {
        let mut entry = match archive.by_name(name) {
            Ok(entry) => entry,
            Err(zip::result::ZipError::FileNotFound) => {
                return Err(Error::MissingMember { member: (*name).to_owned() });
            }
            Err(error) => return Err(zip_error(error)),
        };
        let declared = entry.size();
        let mut content = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        // Never trust the declared size: read at most one byte past it.
        (&mut entry)
            .take(declared + 1)
            .read_to_end(&mut content)
            .map_err(|error| refuse(name, format!("cannot decompress: {error}")))?;
        if content.len() as u64 != declared {
            return Err(refuse(name, format!("actual size differs from the declared {declared} bytes")));
        }
        members.insert((*name).to_owned(), content);
    }
    Ok(ArchiveContents { members, sha256, md5, bytes })
}

/// Reads a dataset directory (BEIR's folder, unzipped) as [`read_archive`] reads a zip: `corpus.jsonl`,
/// `queries.jsonl` and `qrels/<split>.tsv`, each a regular file within the member cap (a symlink, FIFO or
/// device is refused unread), keyed as `prefix/<file>`. Its `sha256` is the directory's digest
/// ([`directory_digest`]); it has no md5 (BEIR publishes none of a directory).
///
/// # Errors
/// [`Error::MissingMember`] for a file that is not there, [`Error::UnsafeMember`] for one over a cap or not a
/// regular file.
pub fn read_directory(dir: &Path, prefix: &str, split: &str) -> Result<ArchiveContents> {
    let qrels = format!("qrels/{split}.tsv");
    let relative = ["corpus.jsonl", "queries.jsonl", qrels.as_str()];
    let mut members = BTreeMap::new();
    let mut read = Vec::new();
    let mut total = 0u64;
    for name in relative {
        let member = format!("{prefix}/{name}");
        let bytes = match safe_fs::read_regular(&dir.join(name), MAX_MEMBER_BYTES) {
            Ok(bytes) => bytes,
            Err(error) if error.is_not_found() => return Err(Error::MissingMember { member }),
            Err(error) => return Err(Error::UnsafeMember { member, rule: error.to_string() }),
        };
        total += bytes.len() as u64;
        if total > MAX_TOTAL_BYTES {
            return Err(Error::UnsafeMember {
                member,
                rule: format!("total exceeds the {MAX_TOTAL_BYTES}-byte cap"),
            });
        }
        read.push(((*name).to_owned(), sha256_hex(&bytes)));
        members.insert(member, bytes);
    }
    Ok(ArchiveContents { members, sha256: directory_digest(&read), md5: String::new(), bytes: total })
}

/// A dataset directory's digest: sha256 (hex) over `<path> NUL <hex sha256> LF` of each file read, in the order
/// read (`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`). The verifier computes the same with its own code.
pub fn directory_digest(files: &[(String, String)]) -> String {
    let listing: String = files.iter().map(|(name, sha256)| format!("{name}\0{sha256}\n")).collect();
    sha256_hex(listing.as_bytes())
}

/// The dataset folders of an archive in BEIR's layout, each holding `corpus.jsonl`, `queries.jsonl` and
/// `qrels/<split>.tsv`: one folder (`NAME/`), or the forums of one (`NAME/<forum>/`, as CQADupStack's zip has
/// them), in name order. The name an archive no registry names goes by. Only the central directory is read;
/// the members are checked when the fixture is built.
///
/// # Errors
/// [`Error::Io`], [`Error::Zip`], [`Error::MissingMember`] when no folder holds a `corpus.jsonl`,
/// [`Error::UnsafeMember`] when the folders are not one dataset's (two top folders, a corpus beside forums) or
/// a folder's name is not a plain name.
pub fn beir_folders(path: &Path) -> Result<Vec<String>> {
    if path.is_dir() {
        let name = path
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        if !path.join("corpus.jsonl").is_file() {
            return Err(Error::MissingMember {
                member: format!("{name}/corpus.jsonl (a dataset directory holds it)"),
            });
        }
        if !is_plain_name(&name) {
            return Err(Error::UnsafeMember {
                member: format!("{name}/"),
                rule: "the dataset directory's name must be one plain name (letters, digits, '.', '-', '_')"
                    .into(),
            });
        }
        return Ok(vec![name]);
    }
    let file = std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let zip_error =
        |error: zip::result::ZipError| Error::Zip { path: path.to_path_buf(), reason: error.to_string() };
    let archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(zip_error)?;
    let mut folders: Vec<String> = Vec::new();
    for name in archive.file_names() {
        if let Some(folder) = name.map_err(zip_error)?.strip_suffix("/corpus.jsonl") {
            folders.push(folder.to_owned());
        }
    }
    folders.sort();
    let refuse =
        |folder: &str, rule: String| Error::UnsafeMember { member: format!("{folder}/corpus.jsonl"), rule };
    let Some(first) = folders.first() else {
        return Err(Error::MissingMember { member: "NAME/corpus.jsonl (BEIR's layout: one folder)".into() });
    };
    let top = first.split('/').next().unwrap_or_default().to_owned();
    if let Some(other) = folders.iter().find(|folder| folder.split('/').next() != Some(top.as_str())) {
        return Err(refuse(other, format!("a second dataset beside {top}/: one dataset per archive")));
    }
    for folder in &folders {
        let parts: Vec<&str> = folder.split('/').collect();
        if !parts.iter().all(|part| is_plain_name(part)) {
            return Err(refuse(
                folder,
                "each folder must be one plain name (letters, digits, '.', '-', '_')".into(),
            ));
        }
        if parts.len() > 2 || (folders.len() > 1 && parts.len() != 2) {
            return Err(refuse(
                folder,
                format!(
                    "BEIR's layout is {top}/corpus.jsonl, or forums as {top}/<forum>/corpus.jsonl, not both"
                ),
            ));
        }
    }
    Ok(folders)
}

/// A name usable as an archive folder and in file names: ASCII letters, digits, `.`, `-`, `_`, not starting
/// with `.`.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The member names listed in the central directory, in order, read straight from the bytes; `None` when
/// the archive is not a plain (non-ZIP64) zip whose directory this reader can walk.
fn central_directory_names(raw: &[u8]) -> Option<Vec<Vec<u8>>> {
    let u16_at = |at: usize| raw.get(at..at + 2).map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    let u32_at =
        |at: usize| raw.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let end = raw.windows(4).rposition(|w| w == b"PK\x05\x06")?;
    let entries = u16_at(end + 10)?;
    let mut at = u32_at(end + 16)?;
    if entries == 0xffff || at == 0xffff_ffff {
        return None;
    }
    let mut names = Vec::with_capacity(entries);
    for _ in 0..entries {
        if raw.get(at..at + 4)? != b"PK\x01\x02" {
            return None;
        }
        let (name_len, extra_len, comment_len) = (u16_at(at + 28)?, u16_at(at + 30)?, u16_at(at + 32)?);
        names.push(raw.get(at + 46..at + 46 + name_len)?.to_vec());
        at += 46 + name_len + extra_len + comment_len;
    }
    Some(names)
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes` (a finished digest).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::check_name;

    #[test]
    fn member_names() {
        for good in ["scifact/corpus.jsonl", "scifact/", "a/b/c.txt", "a..b/c"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for (bad, rule) in [
            ("/etc/passwd", "absolute"),
            ("scifact/../../x", "'..'"),
            ("..", "'..'"),
            ("scifact\\corpus.jsonl", "backslash"),
            ("C:/x", "drive"),
            ("c:x", "drive"),
            ("a\0b", "NUL"),
            ("", "empty"),
        ] {
            let error = check_name(bad).unwrap_err();
            assert!(error.contains(rule), "{bad:?}: {error}");
        }
    }
}
