//! Durability under a power cut, not a process kill: every SQLite file operation of the store goes through a
//! recording VFS, and a "power cut" is the files as their last fsync left them. Copying the files while the
//! store is open reads the page cache, which holds unsynced writes too, so it cannot see a missing fsync; this
//! can.
//!
//! Its own test binary: the recording VFS is registered as SQLite's default for the whole process.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, non_snake_case)]

#[allow(dead_code)]
mod util;

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rusqlite::ffi;
use semantic_memory::{FactStore, SearchConfig, SearchContext};

use util::{Rng, store_in, synthetic_text, unit_vector};

/// The synced image of every recorded file: its bytes as of its last successful fsync. A file never synced is
/// absent (its directory entry would not have survived either).
#[derive(Default)]
struct Disk {
    watched: Vec<PathBuf>,
    synced: BTreeMap<PathBuf, Vec<u8>>,
    syncs: usize,
}

fn disk() -> &'static Mutex<Disk> {
    static DISK: OnceLock<Mutex<Disk>> = OnceLock::new();
    DISK.get_or_init(Mutex::default)
}

/// Writes the synced image of everything under `dir` into `into`, as a power cut would leave it.
fn power_cut(dir: &Path, into: &Path) -> usize {
    let disk = disk().lock().unwrap();
    let mut files = 0;
    for (path, bytes) in &disk.synced {
        if let Ok(relative) = path.strip_prefix(dir) {
            std::fs::write(into.join(relative), bytes).unwrap();
            files += 1;
        }
    }
    files
}

/// The shim's file: SQLite allocates `szOsFile` bytes, this header first, then the real VFS's file.
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    path: *mut PathBuf,
}

const HEADER: usize = std::mem::size_of::<ShimFile>().next_multiple_of(16);

/// The real file behind `file`, and its methods.
unsafe fn real(file: *mut ffi::sqlite3_file) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
    unsafe {
        let real = (*file.cast::<ShimFile>()).real;
        (real, &*(*real).pMethods)
    }
}

macro_rules! forward {
    ($name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            unsafe {
                let (real, methods) = real(file);
                (methods.$name.unwrap())(real $(, $arg)*)
            }
        }
    };
}

forward!(xRead(buffer: *mut c_void, amount: c_int, offset: i64) -> c_int);
forward!(xWrite(buffer: *const c_void, amount: c_int, offset: i64) -> c_int);
forward!(xTruncate(size: i64) -> c_int);
forward!(xFileSize(size: *mut i64) -> c_int);
forward!(xLock(level: c_int) -> c_int);
forward!(xUnlock(level: c_int) -> c_int);
forward!(xCheckReservedLock(out: *mut c_int) -> c_int);
forward!(xFileControl(op: c_int, arg: *mut c_void) -> c_int);
forward!(xSectorSize() -> c_int);
forward!(xDeviceCharacteristics() -> c_int);
forward!(xShmMap(page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int);
forward!(xShmLock(offset: c_int, n: c_int, flags: c_int) -> c_int);
forward!(xShmBarrier() -> ());
forward!(xShmUnmap(delete: c_int) -> c_int);
forward!(xFetch(offset: i64, amount: c_int, out: *mut *mut c_void) -> c_int);
forward!(xUnfetch(offset: i64, page: *mut c_void) -> c_int);

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let (real, methods) = real(file);
        let rc = (methods.xClose.unwrap())(real);
        let path = (*file.cast::<ShimFile>()).path;
        if !path.is_null() {
            drop(Box::from_raw(path));
        }
        rc
    }
}

/// The one operation that makes bytes durable: what the file holds now is what a power cut leaves.
unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    unsafe {
        let (real, methods) = real(file);
        let rc = (methods.xSync.unwrap())(real, flags);
        let path = (*file.cast::<ShimFile>()).path;
        // A file synced after its name was unlinked has no name to come back under.
        if rc == ffi::SQLITE_OK
            && !path.is_null()
            && let Ok(bytes) = std::fs::read(&*path)
            && let Ok(mut disk) = disk().lock()
        {
            disk.syncs += 1;
            disk.synced.insert((*path).clone(), bytes);
        }
        rc
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(xRead),
    xWrite: Some(xWrite),
    xTruncate: Some(xTruncate),
    xSync: Some(x_sync),
    xFileSize: Some(xFileSize),
    xLock: Some(xLock),
    xUnlock: Some(xUnlock),
    xCheckReservedLock: Some(xCheckReservedLock),
    xFileControl: Some(xFileControl),
    xSectorSize: Some(xSectorSize),
    xDeviceCharacteristics: Some(xDeviceCharacteristics),
    xShmMap: Some(xShmMap),
    xShmLock: Some(xShmLock),
    xShmBarrier: Some(xShmBarrier),
    xShmUnmap: Some(xShmUnmap),
    xFetch: Some(xFetch),
    xUnfetch: Some(xUnfetch),
};

unsafe fn real_vfs(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    unsafe { (*vfs).pAppData.cast() }
}

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    unsafe {
        let real_vfs = real_vfs(vfs);
        let real = file.cast::<u8>().add(HEADER).cast::<ffi::sqlite3_file>();
        let shim = file.cast::<ShimFile>();
        (*shim).base.pMethods = std::ptr::null();
        let rc = ((*real_vfs).xOpen.unwrap())(real_vfs, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let path = (!name.is_null())
            .then(|| PathBuf::from(CStr::from_ptr(name).to_string_lossy().into_owned()))
            .filter(|path| {
                disk().lock().is_ok_and(|disk| disk.watched.iter().any(|dir| path.starts_with(dir)))
            })
            .map_or(std::ptr::null_mut(), |path| Box::into_raw(Box::new(path)));
        std::ptr::write(shim, ShimFile { base: ffi::sqlite3_file { pMethods: &METHODS }, real, path });
        rc
    }
}

/// A deletion SQLite asked to make durable (`sync_dir`) is on disk; any other may come back after a cut.
unsafe extern "C" fn x_delete(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    unsafe {
        let real_vfs = real_vfs(vfs);
        let rc = ((*real_vfs).xDelete.unwrap())(real_vfs, name, sync_dir);
        if rc == ffi::SQLITE_OK
            && sync_dir != 0
            && let Ok(mut disk) = disk().lock()
        {
            disk.synced.remove(&PathBuf::from(CStr::from_ptr(name).to_string_lossy().into_owned()));
        }
        rc
    }
}

/// Registers the recording VFS as the process's default, once.
fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| unsafe {
        let unix = ffi::sqlite3_vfs_find(std::ptr::null());
        assert!(!unix.is_null());
        let mut shim: ffi::sqlite3_vfs = *unix;
        shim.zName = c"powercut".as_ptr();
        shim.pAppData = unix.cast();
        shim.szOsFile = i32::try_from(HEADER).unwrap() + (*unix).szOsFile;
        shim.xOpen = Some(x_open);
        shim.xDelete = Some(x_delete);
        shim.pNext = std::ptr::null_mut();
        let shim = Box::leak(Box::new(shim));
        assert_eq!(ffi::sqlite3_vfs_register(shim, 1), ffi::SQLITE_OK);
    });
}

fn watch(dir: &Path) {
    install();
    disk().lock().unwrap().watched.push(dir.to_owned());
}

/// The recorder itself: what was written and synced survives the cut, what was only written does not. Without
/// this, a recorder that kept every write would make the store's test pass whatever the store did.
#[test]
fn the_recorder_keeps_what_was_synced_and_drops_what_was_not() {
    let dir = tempfile::tempdir().unwrap();
    watch(dir.path());
    let count_after_cut = |synchronous: &str| {
        let name = format!("{synchronous}.db");
        let conn = rusqlite::Connection::open(dir.path().join(&name)).unwrap();
        // The table, durably (EXTRA also makes the journal's unlink durable), then the log.
        conn.pragma_update(None, "synchronous", "EXTRA").unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", synchronous).unwrap();
        conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let cut = tempfile::tempdir().unwrap();
        power_cut(dir.path(), cut.path());
        let copy = rusqlite::Connection::open(cut.path().join(&name)).unwrap();
        let rows: i64 = copy
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap_or_else(|e| panic!("{synchronous}: {e}"));
        drop(conn);
        rows
    };
    assert_eq!(count_after_cut("FULL"), 1, "a synced commit survives");
    assert_eq!(count_after_cut("OFF"), 0, "an unsynced commit is lost");
}

/// The store's promise: a receipt is on disk before its search returns. Cut the power after searches that
/// cross the log's checkpoints and every receipt returned so far is in what survives.
#[test]
fn every_returned_receipt_survives_a_power_cut() {
    let mut rng = Rng::new(7);
    let corpus: Vec<String> = (0..50).map(|_| synthetic_text(&mut rng, 40)).collect();
    let refs: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    watch(dir.path());
    let test = store_in(dir, &refs, 8, 8);
    let config = SearchConfig { top_k: 50, ..SearchConfig::default() };
    let mut returned = Vec::new();
    let cuts = [0, 1, 57, 130, 255, 299];
    for index in 0..300 {
        let query = unit_vector(&mut rng, 8);
        let context = SearchContext::new(format!("q-{index}"), "ns");
        let outcome =
            test.store.search_explained_with_context(&corpus[index % 50], &query, &config, &context);
        returned.push(outcome.unwrap().receipt);
        if cuts.contains(&index) {
            let cut = tempfile::tempdir().unwrap();
            let files = power_cut(test.dir.path(), cut.path());
            assert!(files >= 1, "nothing was ever synced");
            let reopened = FactStore::open(cut.path().join("facts.db"), &util::options(8)).unwrap();
            assert_eq!(reopened.receipt_count().unwrap(), index + 1, "after search {index}");
            for receipt in [&returned[0], &returned[index / 2], &returned[index]] {
                assert_eq!(reopened.receipt_for(&receipt.request_id).unwrap().as_ref(), Some(receipt));
            }
        }
    }
    let syncs = disk().lock().unwrap().syncs;
    assert!(syncs >= 300, "one fsync per receipt at least: {syncs}");
}
