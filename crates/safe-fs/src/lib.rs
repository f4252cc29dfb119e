//! `safe-fs`: file I/O that survives crashes and hostile inputs.
//!
//! # Overview
//! - Writes ([`write_atomically`], [`write_new`], [`publish_dir`]) go through a private temp file or
//!   directory with a random name, created exclusively (so a symlink planted at a predictable name is never
//!   followed), fsync'd, then renamed into place; the directory is fsync'd so the rename survives a crash.
//!   A reader sees the old file or the new one, never half of either.
//! - Reads of files that a stranger may have made ([`read_regular`], [`hash_regular`]) refuse symlinks,
//!   FIFOs, devices and directories before reading a byte, never block on open, and stop at a byte cap, so
//!   an input can neither hang the reader, exhaust its memory nor redirect it elsewhere. The bytes returned
//!   are the bytes hashed: callers parse what they hashed, never a second read.
//! - [`halt`] marks the places where the crash tests stop a process in order to SIGKILL it; they are also
//!   where a process told to stop by SIGINT or SIGTERM ([`stop`]) ends, its finished work on disk.
//! - [`lock_dir`] makes a directory one process's at a time.
//! - [`durable`] is where every fsync goes, so that the power-cut tests can see a missing one.

pub mod durable;
mod error;
pub mod halt;
mod lock;
mod read;
pub mod stop;
mod write;

pub use crate::error::{Error, Result};
pub use crate::lock::{Contention, DirLock, LOCK_FILE, lock_dir};
pub use crate::read::{
    Limits, follow_to_regular, hash_regular, open_regular_capped, read_regular, read_regular_in,
};
pub use crate::write::{AtomicWriter, publish_dir, staging_dir, write_atomically, write_new};
