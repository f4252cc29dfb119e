//! What every writing command does first: take the exclusive lock of each directory it writes, and ask for
//! SIGINT and SIGTERM to end the work at the next durable point with a word about what was kept.

use std::path::{Path, PathBuf};

use anyhow::Context;
use safe_fs::{Contention, DirLock};

use crate::cli::LockArgs;

/// The held locks; dropping them releases the directories.
pub(crate) struct Guard {
    _locks: Vec<DirLock>,
    /// The directories this guard created: removed again when nothing but the lock was written there.
    fresh: Vec<PathBuf>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        for dir in &self.fresh {
            let names: Vec<_> = match std::fs::read_dir(dir) {
                Ok(entries) => entries.filter_map(Result::ok).map(|entry| entry.file_name()).collect(),
                Err(_) => continue,
            };
            if names.iter().all(|name| name == safe_fs::LOCK_FILE) {
                let _ = std::fs::remove_file(dir.join(safe_fs::LOCK_FILE));
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// Whether a stop signal waits for the next durable point (long work with halt points), or ends the process at
/// once as by default (short work whose every write is atomic, where dying anywhere is as safe).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnStop {
    /// Finish the durable step in hand, then exit 130/143 with a word on what was kept.
    AtDurablePoint,
    /// The default: end at once.
    AtOnce,
}

/// Locks `created` (made if missing) and `existing` (which must exist: a mistyped path is an error, not a new
/// directory) for `command`, in path order so that two waiting processes never hold one each; and installs
/// the stop handler when `on_stop` asks for it.
pub(crate) fn writing(
    command: &str,
    created: &[&Path],
    existing: &[&Path],
    args: &LockArgs,
    on_stop: OnStop,
) -> anyhow::Result<Guard> {
    let mut sorted: Vec<PathBuf> = Vec::new();
    let mut fresh = Vec::new();
    for dir in created {
        if dir.symlink_metadata().is_err() {
            fresh.push(dir.to_path_buf());
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for dir in created.iter().chain(existing) {
        if !dir.is_dir() {
            anyhow::bail!("{}: is not a directory", dir.display());
        }
        sorted.push(dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))?);
    }
    sorted.sort();
    sorted.dedup();
    if on_stop == OnStop::AtDurablePoint {
        safe_fs::stop::install(farewell);
    }
    let contention = if args.wait { Contention::Wait } else { Contention::Refuse };
    let purpose = format!("scifact-audit {command}");
    let mut locks = Vec::new();
    for dir in &sorted {
        let waiting = |holder: &str| {
            crate::progress::say(&format!(
                "{}: in use by {holder}; waiting for it (--wait; Ctrl-C to give up)",
                dir.display()
            ));
        };
        locks.push(safe_fs::lock_dir(dir, &purpose, contention, &waiting)?);
    }
    Ok(Guard { _locks: locks, fresh })
}

/// Said on the way out after a stop signal, at a durable point.
fn farewell(signal: &str) {
    let stage = crate::progress::last_stage();
    let at = if stage.is_empty() { String::new() } else { format!(" during {stage}") };
    crate::progress::say(&format!(
        "stopped by {signal}{at}: everything finished so far is on disk and is kept; rerun the same command to \
         resume"
    ));
}

/// The exit code of an error that is a stop signal's (128 + the signal), if it is one.
pub(crate) fn stopped_code(error: &anyhow::Error) -> Option<u8> {
    error.chain().find_map(|cause| match cause.downcast_ref::<safe_fs::Error>() {
        Some(safe_fs::Error::Stopped { signal }) => u8::try_from(128 + signal).ok(),
        _ => None,
    })
}
