//! Reading the BEIR archive safely: every member is checked against path, type, size, ratio and membership
//! rules before any byte is decompressed, and members are read into memory or streamed, never extracted to
//! disk. Every byte read is hashed on the way, so the digests a fixture records are of what was parsed.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use md5::Md5;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Largest uncompressed size accepted for a member read whole (queries, judgements): 2 GiB.
pub const MAX_MEMBER_BYTES: u64 = 2 << 30;
/// Largest uncompressed size accepted for a member streamed line by line (the corpus): 16 GiB. msmarco's
/// corpus is 3.2 GB, the largest of BEIR's; memory follows what is kept of it, not its size.
pub const MAX_STREAMED_BYTES: u64 = 16 << 30;
/// Largest compression ratio accepted for a member (uncompressed / compressed): 100. JSON text compresses
/// about 3-5x; ratios in the hundreds are how zip bombs look.
pub const MAX_RATIO: u64 = 100;
/// Largest central directory read to look for duplicate names: 64 MiB (a member costs it ~100 bytes).
const MAX_DIRECTORY_BYTES: u64 = 64 << 20;

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

/// What identifies a dataset once its members are read: the digests a fixture records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetDigests {
    /// Lowercase hex sha256 of the archive file, or a directory's [`directory_digest`].
    pub sha256: String,
    /// Lowercase hex md5 of the archive file; empty for a directory (BEIR publishes none of one).
    pub md5: String,
    /// The archive's size, or the bytes of the files read from a directory.
    pub bytes: u64,
    /// Member name (`prefix/corpus.jsonl`, ...) to the lowercase hex sha256 of its bytes, for each member read.
    pub members: BTreeMap<String, String>,
}

/// A dataset's members, from a checked zip or a directory in BEIR's layout, read whole ([`Dataset::read`]) or
/// streamed ([`Dataset::stream`]), each hashed and its length checked on the way.
pub struct Dataset {
    source: Source,
    /// `(member, relative name, hex sha256)` of each member read, in the order read.
    read: Vec<(String, String, String)>,
    total: u64,
}

enum Source {
    Zip { archive: zip::ZipArchive<BufReader<File>>, path: PathBuf, sha256: String, md5: String, bytes: u64 },
    Directory { dir: PathBuf, prefix: String },
}

/// Counts and hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.hasher.update(&buffer[..read]);
        self.count += read as u64;
        Ok(read)
    }
}

/// An archive file's sha256 and md5 (lowercase hex; BEIR publishes md5) and length.
pub(crate) struct ArchiveDigests {
    pub(crate) sha256: String,
    pub(crate) md5: String,
    pub(crate) bytes: u64,
}

/// Computes [`ArchiveDigests`] from bytes fed to it in pieces, as a download or a file passes.
#[derive(Default)]
pub(crate) struct ArchiveHasher {
    sha256: Sha256,
    md5: Md5,
    bytes: u64,
}

impl ArchiveHasher {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.sha256.update(bytes);
        self.md5.update(bytes);
        self.bytes += bytes.len() as u64;
    }

    pub(crate) fn finish(self) -> ArchiveDigests {
        ArchiveDigests {
            sha256: hex(&self.sha256.finalize()),
            md5: hex(&self.md5.finalize()),
            bytes: self.bytes,
        }
    }
}

/// The digests of everything `reader` holds, streamed (an archive may be a gigabyte).
pub(crate) fn digests_of(reader: &mut impl Read) -> std::io::Result<ArchiveDigests> {
    let mut hasher = ArchiveHasher::default();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = reader.read(&mut buffer)?;
        if read == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buffer[..read]);
    }
}

/// The md5 (hex) of the archive at `path`, as BEIR publishes its zips' digests; `None` for a dataset directory,
/// which is never BEIR's file. Opened as a regular file only (a FIFO or device is refused, never read).
///
/// # Errors
/// [`Error::File`] for a path that is not a regular file, [`Error::Io`] when reading fails.
pub fn archive_md5(path: &Path) -> Result<Option<String>> {
    if path.is_dir() {
        return Ok(None);
    }
    let (mut file, _) = safe_fs::open_regular_capped(path, u64::MAX)?;
    let digests = digests_of(&mut file).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    Ok(Some(digests.md5))
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

fn refuse(member: &str, rule: String) -> Error {
    Error::UnsafeMember { member: member.to_owned(), rule }
}

impl Dataset {
    /// Opens the zip at `path`, hashes it, and checks every member: members in `wanted` may be read, those in
    /// `allowed` (directories, other splits and forums) may be present and are never decompressed, and any
    /// other member refuses the whole archive.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Zip`] for a truncated or corrupt archive, [`Error::UnsafeMember`] naming the
    /// member and rule.
    pub fn open_archive(path: &Path, wanted: &[&str], allowed: &[&str]) -> Result<Dataset> {
        let io_error = |source| Error::Io { path: path.to_path_buf(), source };
        // A regular file, never a FIFO or a device (which would block or never end).
        let (mut file, _) = safe_fs::open_regular_capped(path, u64::MAX)?;
        let ArchiveDigests { sha256, md5, bytes } = digests_of(&mut file).map_err(io_error)?;
        // The zip reader keeps only one entry per name, so duplicates are looked for in the raw directory.
        let names = central_directory_names(&mut file, bytes)
            .map_err(io_error)?
            .map_err(|reason| Error::Zip { path: path.to_path_buf(), reason })?;
        let mut seen = HashSet::new();
        for name in &names {
            let name = String::from_utf8_lossy(name).into_owned();
            if !seen.insert(name.clone()) {
                return Err(refuse(&name, "duplicate member name".into()));
            }
        }
        file.seek(SeekFrom::Start(0)).map_err(io_error)?;
        let zip_error =
            |error: zip::result::ZipError| Error::Zip { path: path.to_path_buf(), reason: error.to_string() };
        let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(zip_error)?;
        // What the zip reader reads must be the directory checked above: the same members, in the same order.
        let read: Vec<Vec<u8>> = (0..archive.len())
            .map(|index| archive.by_index_raw(index).map(|entry| entry.name_raw().to_vec()))
            .collect::<std::result::Result<_, _>>()
            .map_err(zip_error)?;
        if read != names {
            return Err(Error::Zip {
                path: path.to_path_buf(),
                reason: format!(
                    "its central directory reads two ways ({} members by its end record, {} by the zip reader): \
                     which members are read would not be the ones checked",
                    names.len(),
                    read.len()
                ),
            });
        }
        let mut seen = HashSet::new();
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
            if size > MAX_STREAMED_BYTES {
                return Err(refuse(
                    &name,
                    format!("declared size {size} bytes exceeds the {MAX_STREAMED_BYTES}-byte cap"),
                ));
            }
            let compressed = entry.compressed_size().max(1);
            if size / compressed > MAX_RATIO {
                return Err(refuse(
                    &name,
                    format!("compression ratio {} exceeds the cap of {MAX_RATIO}", size / compressed),
                ));
            }
        }
        Ok(Dataset {
            source: Source::Zip { archive, path: path.to_path_buf(), sha256, md5, bytes },
            read: Vec::new(),
            total: 0,
        })
    }

    /// A dataset directory (BEIR's folder, unzipped) whose files are read as members `prefix/<file>`: each a
    /// regular file (a symlink, FIFO or device is refused unread). Its digest is the directory's
    /// ([`directory_digest`]) over the files in the order read.
    pub fn open_directory(dir: &Path, prefix: &str) -> Dataset {
        Dataset {
            source: Source::Directory { dir: dir.to_path_buf(), prefix: prefix.to_owned() },
            read: Vec::new(),
            total: 0,
        }
    }

    /// Reads `member` whole, within [`MAX_MEMBER_BYTES`].
    ///
    /// # Errors
    /// [`Error::MissingMember`], [`Error::UnsafeMember`] for one over the cap, not what it declares, or that
    /// does not decompress.
    pub fn read(&mut self, member: &str) -> Result<Vec<u8>> {
        self.consume(member, MAX_MEMBER_BYTES, |reader| {
            let mut bytes = Vec::new();
            reader
                .read_to_end(&mut bytes)
                .map_err(|error| refuse(member, format!("cannot read: {error}")))?;
            Ok(bytes)
        })
    }

    /// Hands `member` to `parse` as a buffered stream, within [`MAX_STREAMED_BYTES`]; what `parse` leaves
    /// unread is read (and hashed) after it, so the member's digest and length are always checked whole.
    ///
    /// # Errors
    /// As [`Dataset::read`], and `parse`'s own.
    pub fn stream<T>(
        &mut self,
        member: &str,
        parse: impl FnOnce(&mut dyn BufRead) -> Result<T>,
    ) -> Result<T> {
        self.consume(member, MAX_STREAMED_BYTES, |reader| {
            let mut buffered = BufReader::with_capacity(1 << 20, reader);
            let parsed = parse(&mut buffered)?;
            std::io::copy(&mut buffered, &mut std::io::sink())
                .map_err(|error| refuse(member, format!("cannot read: {error}")))?;
            Ok(parsed)
        })
    }

    fn consume<T>(
        &mut self,
        member: &str,
        cap: u64,
        use_it: impl FnOnce(&mut dyn Read) -> Result<T>,
    ) -> Result<T> {
        let (relative, declared, reader): (String, u64, Box<dyn Read + '_>) = match &mut self.source {
            Source::Zip { archive, path, .. } => {
                let entry = match archive.by_name(member) {
                    Ok(entry) => entry,
                    Err(zip::result::ZipError::FileNotFound) => {
                        return Err(Error::MissingMember { member: member.to_owned() });
                    }
                    Err(error) => return Err(Error::Zip { path: path.clone(), reason: error.to_string() }),
                };
                let declared = entry.size();
                if declared > cap {
                    return Err(refuse(
                        member,
                        format!("declared size {declared} bytes exceeds the {cap}-byte cap"),
                    ));
                }
                // Never trust the declared size: read at most one byte past it.
                (member.to_owned(), declared, Box::new(entry.take(declared + 1)))
            }
            Source::Directory { dir, prefix } => {
                let relative = member.strip_prefix(&format!("{prefix}/")).unwrap_or(member).to_owned();
                let (file, size) = match safe_fs::open_regular_capped(&dir.join(&relative), cap) {
                    Ok(opened) => opened,
                    Err(error) if error.is_not_found() => {
                        return Err(Error::MissingMember { member: member.to_owned() });
                    }
                    Err(error) => return Err(refuse(member, error.to_string())),
                };
                (relative, size, Box::new(file.take(size + 1)))
            }
        };
        let mut hashing = Hashing { inner: reader, hasher: Sha256::new(), count: 0 };
        let value = use_it(&mut hashing)?;
        if hashing.count != declared {
            return Err(refuse(member, format!("actual size differs from the declared {declared} bytes")));
        }
        self.total += declared;
        self.read.push((member.to_owned(), relative, hex(&hashing.hasher.finalize())));
        Ok(value)
    }

    /// The digests of the dataset and of each member read.
    pub fn finish(self) -> DatasetDigests {
        let members = self.read.iter().map(|(member, _, sha256)| (member.clone(), sha256.clone())).collect();
        match self.source {
            Source::Zip { sha256, md5, bytes, .. } => DatasetDigests { sha256, md5, bytes, members },
            Source::Directory { .. } => {
                let files: Vec<(String, String)> =
                    self.read.into_iter().map(|(_, relative, sha256)| (relative, sha256)).collect();
                DatasetDigests {
                    sha256: directory_digest(&files),
                    md5: String::new(),
                    bytes: self.total,
                    members,
                }
            }
        }
    }
}

/// Opens `path`, checks every member, and returns the bytes of each member in `wanted` (each within
/// [`MAX_MEMBER_BYTES`]). Members in `allowed` (directories, unused files) may be present; any other member
/// refuses the whole archive.
///
/// # Errors
/// As [`Dataset::open_archive`] and [`Dataset::read`].
pub fn read_archive(path: &Path, wanted: &[&str], allowed: &[&str]) -> Result<ArchiveContents> {
    let mut dataset = Dataset::open_archive(path, wanted, allowed)?;
    let mut members = BTreeMap::new();
    for name in wanted {
        members.insert((*name).to_owned(), dataset.read(name)?);
    }
    let digests = dataset.finish();
    Ok(ArchiveContents { members, sha256: digests.sha256, md5: digests.md5, bytes: digests.bytes })
}

/// The sha256 (lowercase hex) a fixture records for the dataset at `path`: a zip file's, streamed, or a
/// directory's [`directory_digest`] over `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv`.
///
/// # Errors
/// [`Error::Io`] for a zip that cannot be read; for a directory, as [`Dataset::stream`].
pub fn dataset_sha256(path: &Path, prefix: &str, split: &str) -> Result<String> {
    if !path.is_dir() {
        return Ok(safe_fs::hash_regular(path, u64::MAX)?.0);
    }
    let mut dataset = Dataset::open_directory(path, prefix);
    for file in ["corpus.jsonl", "queries.jsonl", &format!("qrels/{split}.tsv")] {
        dataset.stream(&format!("{prefix}/{file}"), |_| Ok(()))?;
    }
    Ok(dataset.finish().sha256)
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
        let corpus = path.join("corpus.jsonl");
        match std::fs::symlink_metadata(&corpus) {
            Err(_) => {
                return Err(Error::MissingMember {
                    member: format!("{name}/corpus.jsonl (a dataset directory holds it)"),
                });
            }
            // There, but not a regular file: said as what it is (a link to a device, a FIFO, …), never as absent.
            Ok(meta) if !meta.is_file() => {
                let what = match safe_fs::follow_to_regular(&corpus) {
                    Err(error) => error.to_string(),
                    Ok(_) => format!(
                        "{}: is a symbolic link; a dataset directory's files are read only as regular files",
                        corpus.display()
                    ),
                };
                return Err(Error::UnsafeMember { member: format!("{name}/corpus.jsonl"), rule: what });
            }
            Ok(_) => {}
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
    let (file, _) = safe_fs::open_regular_capped(path, u64::MAX)?;
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

/// The member names of the zip's central directory, read from its own end record (the ZIP64 one when the
/// classic record says to look there), or why they cannot be read. The zip reader keeps one entry per name,
/// so this is the list duplicates are looked for in.
fn central_directory_names(file: &mut File, length: u64) -> std::io::Result<Result<Vec<Vec<u8>>, String>> {
    // The end record is 22 bytes plus a comment of at most 65,535.
    let tail_start = length.saturating_sub(22 + 0xffff);
    file.seek(SeekFrom::Start(tail_start))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let le = |raw: &[u8], at: usize, width: usize| {
        raw.get(at..at + width).map(|b| b.iter().rev().fold(0u64, |n, byte| (n << 8) | u64::from(*byte)))
    };
    let Some(end) = tail.windows(4).rposition(|w| w == b"PK\x05\x06") else {
        return Ok(Err("no end of central directory record".into()));
    };
    // A second record (one planted in the other's comment, say) lets two readers take two directories.
    if tail.windows(4).filter(|w| *w == b"PK\x05\x06").count() > 1 {
        return Ok(Err(
            "two end of central directory records (one inside the other's comment): which directory is read \
             would depend on the reader"
                .into(),
        ));
    }
    let (Some(mut entries), Some(mut size), Some(mut offset)) =
        (le(&tail, end + 10, 2), le(&tail, end + 12, 4), le(&tail, end + 16, 4))
    else {
        return Ok(Err("a truncated end of central directory record".into()));
    };
    if entries == 0xffff || size == 0xffff_ffff || offset == 0xffff_ffff {
        // ZIP64: a 20-byte locator just before the classic record points at the ZIP64 record.
        let locator = end.checked_sub(20).and_then(|at| tail.get(at..at + 20));
        let Some(record_at) = locator.filter(|l| l.starts_with(b"PK\x06\x07")).and_then(|l| le(l, 8, 8))
        else {
            return Ok(Err("a ZIP64 end record without its locator".into()));
        };
        if record_at.saturating_add(56) > length {
            return Ok(Err("a ZIP64 end record beyond the file".into()));
        }
        file.seek(SeekFrom::Start(record_at))?;
        let mut record = vec![0u8; 56];
        file.read_exact(&mut record)?;
        let (Some(e), Some(s), Some(o)) = (le(&record, 32, 8), le(&record, 40, 8), le(&record, 48, 8)) else {
            return Ok(Err("a truncated ZIP64 end record".into()));
        };
        if !record.starts_with(b"PK\x06\x06") {
            return Ok(Err("the ZIP64 locator points at no ZIP64 end record".into()));
        }
        (entries, size, offset) = (e, s, o);
    }
    if size > MAX_DIRECTORY_BYTES || offset.saturating_add(size) > length || entries > size / 46 + 1 {
        return Ok(Err(format!("a central directory of {entries} entries in {size} bytes at {offset}")));
    }
    file.seek(SeekFrom::Start(offset))?;
    let mut raw = Vec::new();
    file.take(size).read_to_end(&mut raw)?;
    let mut names = Vec::new();
    let mut at = 0usize;
    for index in 0..entries {
        if raw.get(at..at + 4) != Some(b"PK\x01\x02".as_slice()) {
            return Ok(Err(format!("central directory entry {index} is not where the one before ends")));
        }
        let (Some(name_len), Some(extra_len), Some(comment_len)) =
            (le(&raw, at + 28, 2), le(&raw, at + 30, 2), le(&raw, at + 32, 2))
        else {
            return Ok(Err(format!("central directory entry {index} is truncated")));
        };
        let (name_len, extra_len, comment_len) =
            (name_len as usize, extra_len as usize, comment_len as usize);
        let Some(name) = raw.get(at + 46..at + 46 + name_len) else {
            return Ok(Err(format!("central directory entry {index}'s name is truncated")));
        };
        names.push(name.to_vec());
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(Ok(names))
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
    use super::{Dataset, check_name};
    use crate::error::Error;

    /// A stored zip of `members` (name, bytes) written by hand, duplicates allowed, its end records classic or
    /// ZIP64 (a classic record of 0xffff entries that sends the reader to the ZIP64 one).
    fn handmade_zip(members: &[(&str, &[u8])], zip64: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut directory = Vec::new();
        for (name, bytes) in members {
            let offset = out.len() as u32;
            let crc = crc32(bytes);
            let size = bytes.len() as u32;
            let fields = |out: &mut Vec<u8>| {
                out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]);
                out.extend_from_slice(&crc.to_le_bytes());
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&(name.len() as u16).to_le_bytes());
                out.extend_from_slice(&0u16.to_le_bytes());
            };
            out.extend_from_slice(b"PK\x03\x04");
            fields(&mut out);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(bytes);
            directory.extend_from_slice(b"PK\x01\x02");
            directory.extend_from_slice(&[20, 0]);
            fields(&mut directory);
            directory.extend_from_slice(&[0; 6]);
            directory.extend_from_slice(&0u32.to_le_bytes());
            directory.extend_from_slice(&offset.to_le_bytes());
            directory.extend_from_slice(name.as_bytes());
        }
        let (start, size, count) = (out.len() as u64, directory.len() as u64, members.len() as u64);
        out.extend_from_slice(&directory);
        if zip64 {
            let record = out.len() as u64;
            out.extend_from_slice(b"PK\x06\x06");
            out.extend_from_slice(&44u64.to_le_bytes());
            out.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            for value in [count, count, size, start] {
                out.extend_from_slice(&value.to_le_bytes());
            }
            out.extend_from_slice(b"PK\x06\x07");
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&record.to_le_bytes());
            out.extend_from_slice(&1u32.to_le_bytes());
        }
        out.extend_from_slice(b"PK\x05\x06");
        out.extend_from_slice(&[0, 0, 0, 0]);
        let (entries, size32, start32) = if zip64 {
            (0xffff, 0xffff_ffff, 0xffff_ffff)
        } else {
            (count as u16, size as u32, start as u32)
        };
        out.extend_from_slice(&entries.to_le_bytes());
        out.extend_from_slice(&entries.to_le_bytes());
        out.extend_from_slice(&size32.to_le_bytes());
        out.extend_from_slice(&start32.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for byte in bytes {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    fn opened(zip: &[u8]) -> Result<Dataset, Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.zip");
        std::fs::write(&path, zip).unwrap();
        Dataset::open_archive(&path, &["d/qrels/test.tsv"], &["d/"])
    }

    #[test]
    fn a_duplicate_member_is_found_behind_a_zip64_end_record_too() {
        let qrels: &[u8] = b"query-id\tcorpus-id\tscore\nq1\td1\t1\n";
        for zip64 in [false, true] {
            let single = handmade_zip(&[("d/qrels/test.tsv", qrels)], zip64);
            assert!(opened(&single).is_ok(), "zip64 {zip64}: {:?}", opened(&single).err());
            let twice = handmade_zip(&[("d/qrels/test.tsv", qrels), ("d/qrels/test.tsv", b"x")], zip64);
            match opened(&twice) {
                Err(Error::UnsafeMember { member, rule }) => {
                    assert_eq!(
                        (member.as_str(), rule.as_str()),
                        ("d/qrels/test.tsv", "duplicate member name")
                    );
                }
                other => panic!("zip64 {zip64}: {:?}", other.err()),
            }
        }
        // An end record that sends the reader to a ZIP64 record that is not there.
        let mut broken = handmade_zip(&[("d/qrels/test.tsv", qrels)], true);
        let locator = broken.len() - 22 - 20;
        broken[locator] = b'X';
        assert!(matches!(opened(&broken), Err(Error::Zip { .. })), "{:?}", opened(&broken).err());
    }

    /// An end record planted in the real one's comment, sending a reader that takes the last record to a
    /// directory that lists the member once, while the real directory lists it twice: the two directories would
    /// be checked and read apart, so the archive is refused.
    #[test]
    fn an_end_record_planted_in_the_comment_is_refused() {
        let qrels: &[u8] = b"query-id\tcorpus-id\tscore\nq1\td1\t1\n";
        let mut zip = handmade_zip(&[("d/qrels/test.tsv", qrels), ("d/qrels/test.tsv", b"x")], false);
        let real_end = zip.len() - 22;
        // A directory of the second entry alone (its local header is the second copy's).
        let real_directory =
            u32::from_le_bytes(zip[real_end + 16..real_end + 20].try_into().unwrap()) as usize;
        let second_entry = zip[real_directory..real_end]
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == b"PK\x01\x02")
            .nth(1)
            .unwrap()
            .0
            + real_directory;
        let planted_directory: Vec<u8> = zip[second_entry..real_end].to_vec();
        let mut planted = planted_directory.clone();
        let planted_start = zip.len() as u32;
        planted.extend_from_slice(b"PK\x05\x06");
        planted.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0]);
        planted.extend_from_slice(&(planted_directory.len() as u32).to_le_bytes());
        planted.extend_from_slice(&planted_start.to_le_bytes());
        planted.extend_from_slice(&0u16.to_le_bytes());
        let comment = planted.len() as u16;
        zip[real_end + 20..real_end + 22].copy_from_slice(&comment.to_le_bytes());
        zip.extend_from_slice(&planted);
        match opened(&zip) {
            Err(Error::Zip { reason, .. }) => {
                assert!(reason.contains("two end of central directory records"), "{reason}")
            }
            other => panic!("expected the archive refused, got {:?}", other.err()),
        }
    }

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
