//! Exclusive locks on the directories a command writes (a work dir, a store, an output directory), so that
//! two processes never interleave their writes. The lock is an advisory `flock` on `.scifact-audit.lock`
//! inside the directory: the kernel drops it when its holder exits, however it exits, so a killed process
//! never leaves a stale lock. The file also says who holds it, for the message a second process prints.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// The lock file's name inside a locked directory.
pub const LOCK_FILE: &str = ".scifact-audit.lock";

/// How often a waiting process tries again.
const POLL: Duration = Duration::from_millis(100);

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    dir: PathBuf,
}

impl DirLock {
    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// What to do when another process holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contention {
    /// Fail at once with [`Error::Locked`].
    Refuse,
    /// Wait until the holder is done, calling `waiting` once with the holder's description. A stop signal
    /// (see [`crate::stop`]) ends the wait with [`Error::Stopped`].
    Wait,
}

/// Takes the exclusive lock of `dir` (created if missing) for `purpose` (a command line, shown to a second
/// process).
///
/// # Errors
/// [`Error::Locked`] when another process holds it and `contention` is [`Contention::Refuse`];
/// [`Error::Stopped`] when a stop signal ends a wait; [`Error::Io`].
pub fn lock_dir(
    dir: &Path,
    purpose: &str,
    contention: Contention,
    waiting: &dyn Fn(&str),
) -> Result<DirLock> {
    std::fs::create_dir_all(dir).map_err(|error| Error::io(dir, error))?;
    let path = dir.join(LOCK_FILE);
    if path.symlink_metadata().is_ok_and(|m| !m.is_file()) {
        return Err(Error::NotRegular { path, kind: "symbolic link or special file" });
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|error| Error::io(&path, error))?;
    let mut told = false;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let holder = holder(&mut file);
                match contention {
                    Contention::Refuse => return Err(Error::Locked { dir: dir.to_owned(), holder }),
                    Contention::Wait => {
                        if !told {
                            waiting(&holder);
                            told = true;
                        }
                        if let Some(signal) = crate::stop::requested() {
                            return Err(Error::Stopped { signal });
                        }
                        std::thread::sleep(POLL);
                    }
                }
            }
            Err(TryLockError::Error(error)) => return Err(Error::io(&path, error)),
        }
    }
    let note = format!(
        "process {} ({purpose}), since unix time {}\n",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
    );
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(note.as_bytes()))
        .map_err(|error| Error::io(&path, error))?;
    Ok(DirLock { _file: file, dir: dir.to_owned() })
}

/// Who holds the lock, as its holder wrote it.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind().and_then(|()| Read::by_ref(file).take(4096).read_to_string(&mut text));
    let text: String = text.trim().chars().map(|c| if c.is_control() { '?' } else { c }).collect();
    if text.is_empty() { "another process (it has not said which yet)".to_owned() } else { text.to_owned() }
}
