//! A model directory's files, read as the hostile input a user may bring: each file a regular file under a size
//! cap, named by a path that stays inside the directory, and reached through a link only when the link ends
//! inside it (or in the blob store beside a Hugging Face cache snapshot, whose files are links into
//! `../../blobs`). A FIFO, a device, a link to nothing or out of the directory is an error naming the file, never
//! "absent": a checkpoint's declared file that cannot be read must not silently become the defaults.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The largest JSON configuration read (config.json, modules.json, the pooling's and sentence-transformers'
/// configs).
pub(crate) const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// The largest `tokenizer.json` (a 250,000-piece multilingual vocabulary is about 17 MB).
pub(crate) const MAX_TOKENIZER_BYTES: u64 = 64 << 20;
/// The largest `model.safetensors` (multilingual-e5-large and bge-m3 hold about 2.3 GB of f32 weights).
pub(crate) const MAX_WEIGHTS_BYTES: u64 = 4 << 30;

/// A checkpoint directory, with where its files may live.
#[derive(Debug, Clone)]
pub(crate) struct ModelDir {
    dir: PathBuf,
    roots: Vec<PathBuf>,
}

impl ModelDir {
    /// The directory `dir`.
    ///
    /// # Errors
    /// [`Error::Io`] when it cannot be resolved (it does not exist, or a link on the way leads nowhere).
    pub(crate) fn open(dir: &Path) -> Result<ModelDir> {
        let canonical =
            std::fs::canonicalize(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
        let mut roots = vec![canonical.clone()];
        // A Hugging Face cache snapshot: models--org--name/snapshots/<revision>/file -> ../../blobs/<sha256>.
        if let Some(snapshots) = canonical.parent()
            && snapshots.file_name().is_some_and(|name| name == "snapshots")
            && let Some(blobs) = snapshots.parent().map(|repo| repo.join("blobs"))
            && let Ok(blobs) = std::fs::canonicalize(blobs)
        {
            roots.push(blobs);
        }
        Ok(ModelDir { dir: dir.to_path_buf(), roots })
    }

    /// The bytes of `relative`, which the checkpoint requires.
    ///
    /// # Errors
    /// [`Error::Io`] (not found) when it is absent; as [`ModelDir::read_optional`] otherwise.
    pub(crate) fn read(&self, relative: &str, cap: u64) -> Result<Vec<u8>> {
        self.read_optional(relative, cap)?.ok_or_else(|| Error::Io {
            path: self.dir.join(relative),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file in the model directory"),
        })
    }

    /// The bytes of `relative`, or `None` when nothing of that name exists (a link that leads nowhere exists).
    ///
    /// # Errors
    /// [`Error::InvalidModelFile`] naming the file for a path that leaves the directory, a link to nothing or out
    /// of the directory, anything but a regular file, or a file over `cap` bytes; [`Error::Io`] when it cannot
    /// be read.
    pub(crate) fn read_optional(&self, relative: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        let path = self.dir.join(relative);
        let invalid = |reason: String| Error::InvalidModelFile { path: path.clone(), reason };
        let inside = !relative.is_empty()
            && Path::new(relative)
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(invalid(format!("the path {relative:?} is not a file inside the model directory")));
        }
        match path.symlink_metadata() {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Io { path, source }),
            Ok(_) => {}
        }
        let target = std::fs::canonicalize(&path)
            .map_err(|error| invalid(format!("a link that leads to nothing readable ({error})")))?;
        if !self.roots.iter().any(|root| target.starts_with(root)) {
            return Err(invalid(format!("leads out of the model directory, to {}", target.display())));
        }
        safe_fs::read_regular(&target, cap).map(Some).map_err(|error| invalid(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(dir: &ModelDir, name: &str) -> String {
        dir.read_optional(name, 1 << 20).unwrap_err().to_string()
    }

    #[cfg(unix)]
    #[test]
    fn only_regular_files_inside_the_directory_are_read() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("model");
        std::fs::create_dir_all(root.join("1_Pooling")).unwrap();
        std::fs::write(root.join("config.json"), b"{}").unwrap();
        std::fs::write(scratch.path().join("outside.json"), b"{}").unwrap();
        std::os::unix::fs::symlink("config.json", root.join("inner-link.json")).unwrap();
        std::os::unix::fs::symlink("../outside.json", root.join("outer-link.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("zero.json")).unwrap();
        std::os::unix::fs::symlink("missing.json", root.join("dangling.json")).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(root.join("fifo.json")).status().unwrap().success());
        let dir = ModelDir::open(&root).unwrap();
        assert_eq!(dir.read_optional("config.json", 1 << 20).unwrap().unwrap(), b"{}");
        assert_eq!(dir.read_optional("inner-link.json", 1 << 20).unwrap().unwrap(), b"{}");
        assert!(dir.read_optional("absent.json", 1 << 20).unwrap().is_none());
        assert!(refused(&dir, "outer-link.json").contains("leads out of the model directory"));
        assert!(refused(&dir, "zero.json").contains("leads out of the model directory"));
        assert!(refused(&dir, "dangling.json").contains("leads to nothing"));
        assert!(refused(&dir, "fifo.json").contains("fifo.json"));
        for escape in ["", "/config.json", "../outside.json", "1_Pooling/../../outside.json"] {
            assert!(refused(&dir, escape).contains("not a file inside the model directory"), "{escape:?}");
        }
        std::fs::write(root.join("big.json"), vec![b' '; 2 << 20]).unwrap();
        assert!(refused(&dir, "big.json").contains("big.json"));
    }

    #[cfg(unix)]
    #[test]
    fn a_hugging_face_cache_snapshot_reads_its_blobs() {
        let scratch = tempfile::tempdir().unwrap();
        let repo = scratch.path().join("models--org--name");
        let snapshot = repo.join("snapshots").join("0123abcd");
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::create_dir_all(repo.join("blobs")).unwrap();
        std::fs::write(repo.join("blobs").join("f00d"), b"{\"a\": 1}").unwrap();
        std::os::unix::fs::symlink("../../blobs/f00d", snapshot.join("config.json")).unwrap();
        let dir = ModelDir::open(&snapshot).unwrap();
        assert_eq!(dir.read("config.json", 1 << 20).unwrap(), b"{\"a\": 1}");
    }
}
