//! Durability, made observable: every fsync this crate makes, and every one the append-only logs make, goes
//! through [`sync_all`], [`sync_data`] or [`sync_dir`]. A test can [`Recording::start`] over a directory and
//! get, after the work, what a power cut at each point would have left on disk ([`Image`]): each directory
//! holds the entries it held at its last sync, and each file the bytes it held at its last sync. Whatever was
//! never synced is lost, as the strictest reading of POSIX allows. A sync that is missing is then a lost file
//! or a lost line in some image, which a test can see, where a SIGKILL (the page cache survives it) cannot.
//!
//! Unrecorded, each sync costs one atomic load beyond the system call.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Makes `file`'s data and metadata durable (`fsync`).
///
/// # Errors
/// The system call's.
pub fn sync_all(file: &File, path: &Path) -> io::Result<()> {
    file.sync_all()?;
    record_file(file, path);
    Ok(())
}

/// Makes `file`'s data durable, and the metadata needed to read it back (`fdatasync`).
///
/// # Errors
/// The system call's.
pub fn sync_data(file: &File, path: &Path) -> io::Result<()> {
    file.sync_data()?;
    record_file(file, path);
    Ok(())
}

/// Makes the entries of directory `dir` durable: a file created, renamed or removed in it survives a power
/// cut only after this. A file system that cannot sync a directory (`EINVAL`) is not an error: it offers
/// nothing stronger.
///
/// # Errors
/// Opening the directory, or the sync (an I/O error, say).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let handle = File::open(dir)?;
    match handle.sync_all() {
        Ok(()) => {}
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => return Ok(()),
        Err(error) => return Err(error),
    }
    if RECORDING.load(Ordering::Acquire)
        && let Ok(mut events) = EVENTS.lock()
        && let Some(events) = events.as_mut()
        && events.covers(dir)
        && let Ok(meta) = handle.metadata()
    {
        let entries = list(dir);
        // A file that is empty when its name is made durable is durable as an empty file.
        let empty = entries
            .iter()
            .filter(|(name, _)| dir.join(name).symlink_metadata().is_ok_and(|m| m.is_file() && m.len() == 0))
            .map(|(_, inode)| *inode)
            .collect();
        events.log.push(Event::Directory { inode: meta.ino(), entries, empty });
    }
    Ok(())
}

fn record_file(file: &File, path: &Path) {
    if !RECORDING.load(Ordering::Acquire) {
        return;
    }
    if let Ok(mut events) = EVENTS.lock()
        && let Some(events) = events.as_mut()
        && events.covers(path)
        && let Ok(meta) = file.metadata()
    {
        // The bytes are read back through the path the writer holds, at the moment of the sync.
        let bytes = std::fs::read(path).unwrap_or_default();
        events.log.push(Event::File { inode: meta.ino(), bytes });
    }
}

/// Entry names of `dir` with their inodes.
fn list(dir: &Path) -> BTreeMap<String, u64> {
    let mut entries = BTreeMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(meta) = entry.path().symlink_metadata() {
            entries.insert(entry.file_name().to_string_lossy().into_owned(), meta.ino());
        }
    }
    entries
}

static RECORDING: AtomicBool = AtomicBool::new(false);
static EVENTS: Mutex<Option<Events>> = Mutex::new(None);
/// One recording at a time in a process: tests run on threads.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

enum Event {
    File { inode: u64, bytes: Vec<u8> },
    Directory { inode: u64, entries: BTreeMap<String, u64>, empty: Vec<u64> },
}

struct Events {
    root: PathBuf,
    log: Vec<Event>,
}

impl Events {
    fn covers(&self, path: &Path) -> bool {
        path.starts_with(&self.root)
    }
}

/// Every sync under one directory, from [`Recording::start`] to [`Recording::images`]. For tests.
pub struct Recording {
    root: PathBuf,
    root_inode: u64,
    /// The tree as it was at the start, taken as durable: directories by inode, files by inode.
    directories: BTreeMap<u64, BTreeMap<String, u64>>,
    files: BTreeMap<u64, Vec<u8>>,
    _one: MutexGuard<'static, ()>,
}

impl Recording {
    /// Takes what is under `root` now as durable and records every sync under it from here on.
    ///
    /// # Errors
    /// When `root` cannot be read.
    pub fn start(root: &Path) -> io::Result<Recording> {
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let root = root.canonicalize()?;
        let mut directories = BTreeMap::new();
        let mut files = BTreeMap::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = list(&dir);
            for (name, inode) in &entries {
                let path = dir.join(name);
                let meta = path.symlink_metadata()?;
                if meta.is_dir() {
                    stack.push(path);
                } else if meta.is_file() {
                    files.insert(*inode, std::fs::read(&path)?);
                }
            }
            directories.insert(dir.symlink_metadata()?.ino(), entries);
        }
        let root_inode = root.symlink_metadata()?.ino();
        if let Ok(mut events) = EVENTS.lock() {
            *events = Some(Events { root: root.clone(), log: Vec::new() });
        }
        RECORDING.store(true, Ordering::Release);
        Ok(Recording { root, root_inode, directories, files, _one: one })
    }

    /// How many syncs have been recorded so far: after work that returned, `images()[syncs_so_far()]` is the
    /// first image that must show it.
    pub fn syncs_so_far(&self) -> usize {
        EVENTS.lock().ok().and_then(|events| events.as_ref().map(|e| e.log.len())).unwrap_or(0)
    }

    /// Stops recording and returns what a power cut would have left before the first sync, after each one,
    /// and so after the last: `images()[i]` holds the first `i` syncs.
    pub fn images(self) -> Vec<Image> {
        RECORDING.store(false, Ordering::Release);
        let log = EVENTS.lock().ok().and_then(|mut events| events.take()).map_or_else(Vec::new, |e| e.log);
        let mut image = Image {
            root: self.root.clone(),
            root_inode: self.root_inode,
            directories: self.directories.clone(),
            files: self.files.clone(),
            syncs: 0,
        };
        let mut images = vec![image.clone()];
        for event in log {
            match event {
                Event::File { inode, bytes } => {
                    image.files.insert(inode, bytes);
                }
                Event::Directory { inode, entries, empty } => {
                    image.directories.insert(inode, entries);
                    for inode in empty {
                        image.files.entry(inode).or_default();
                    }
                }
            }
            image.syncs += 1;
            images.push(image.clone());
        }
        images
    }
}

/// What a power cut would have left of the recorded directory.
#[derive(Debug, Clone)]
pub struct Image {
    root: PathBuf,
    root_inode: u64,
    directories: BTreeMap<u64, BTreeMap<String, u64>>,
    files: BTreeMap<u64, Vec<u8>>,
    syncs: usize,
}

/// A path in an [`Image`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No durable entry has this name.
    Missing,
    /// The entry is durable but its file's bytes never were: after a power cut it may hold anything.
    Unsynced,
    /// The file's bytes.
    Bytes(Vec<u8>),
}

impl Image {
    /// How many syncs this image holds.
    pub fn syncs(&self) -> usize {
        self.syncs
    }

    /// What `path` (under the recorded directory) holds in this image.
    pub fn file(&self, path: &Path) -> Found {
        let Some(inode) = self.inode(path) else { return Found::Missing };
        match self.files.get(&inode) {
            Some(bytes) => Found::Bytes(bytes.clone()),
            None => Found::Unsynced,
        }
    }

    /// The inode a path resolves to through the durable directory entries.
    fn inode(&self, path: &Path) -> Option<u64> {
        let relative = path.strip_prefix(&self.root).map(Path::to_owned).ok().or_else(|| {
            let parent = path.parent()?.canonicalize().ok()?;
            parent.join(path.file_name()?).strip_prefix(&self.root).map(Path::to_owned).ok()
        })?;
        let mut inode = self.root_inode;
        for component in relative.components() {
            let name = component.as_os_str().to_string_lossy();
            inode = *self.directories.get(&inode)?.get(name.as_ref())?;
        }
        Some(inode)
    }

    /// The names durable in directory `dir` (under the recorded directory); none when it is not durable.
    pub fn names(&self, dir: &Path) -> Vec<String> {
        self.inode(dir)
            .and_then(|inode| self.directories.get(&inode))
            .map(|entries| entries.keys().cloned().collect())
            .unwrap_or_default()
    }
}
