//! Halt points: named places in long work (an embedding batch, a store batch, a search, a bundle file) where
//! a process can be told to stop and wait, so that the crash tests can SIGKILL it exactly there and check that
//! rerunning the same command finishes with nothing lost.
//!
//! `SCIFACT_AUDIT_HALT_AT=<point>:<n>` makes the `n`-th pass (1-based; `:<n>` may be left out for the first)
//! through [`point`]`(<point>)` print `halted at <point>:<n>` on stderr and sleep until killed. Unset, a
//! point costs one atomic load. Nothing else in the tool reads the variable; it is for the crash tests only.

use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable naming the halt point.
pub const HALT_ENV: &str = "SCIFACT_AUDIT_HALT_AT";

struct Target {
    name: String,
    pass: u64,
    seen: AtomicU64,
}

fn target() -> Option<&'static Target> {
    static TARGET: OnceLock<Option<Target>> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let spec = std::env::var(HALT_ENV).ok().filter(|s| !s.is_empty())?;
            let (name, pass) = match spec.rsplit_once(':') {
                Some((name, pass)) if pass.parse::<u64>().is_ok() => (name.to_owned(), pass.parse().ok()?),
                _ => (spec, 1),
            };
            Some(Target { name, pass, seen: AtomicU64::new(0) })
        })
        .as_ref()
}

/// Passes the halt point `name`: ends the process here if a stop signal came in since the last point, and
/// halts here if the environment asks for this pass.
pub fn point(name: &str) {
    crate::stop::here();
    signal_if_asked(name);
    let Some(target) = target() else { return };
    if target.name != name {
        return;
    }
    let pass = target.seen.fetch_add(1, Ordering::SeqCst) + 1;
    if pass != target.pass {
        return;
    }
    static STDERR: Mutex<()> = Mutex::new(());
    {
        let _guard = STDERR.lock();
        use std::io::Write;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "halted at {name}:{pass}");
        let _ = err.flush();
    }
    // Halted, a process still ends at a stop signal as it would have here: the signal tests use that.
    loop {
        std::thread::sleep(Duration::from_millis(20));
        crate::stop::here();
    }
}

/// The environment variable naming the write that fails with "No space left on device".
pub const FAIL_WRITE_ENV: &str = "SCIFACT_AUDIT_FAIL_WRITE_AT";

/// For the full-disk tests: `SCIFACT_AUDIT_FAIL_WRITE_AT=<n>` makes the `n`-th file write through this crate
/// or an append-only log (1-based) fail with ENOSPC after half its bytes, as a disk that filled up mid-write would. Unset, it
/// costs one atomic load.
pub fn write_fault() -> Option<std::io::Error> {
    static TARGET: OnceLock<Option<u64>> = OnceLock::new();
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let target = (*TARGET.get_or_init(|| std::env::var(FAIL_WRITE_ENV).ok()?.parse().ok()))?;
    let pass = SEEN.fetch_add(1, Ordering::SeqCst) + 1;
    (pass == target).then(|| std::io::Error::from_raw_os_error(libc::ENOSPC))
}

/// The environment variable naming the pass at which the process sends itself SIGTERM and goes on working.
pub const SIGNAL_ENV: &str = "SCIFACT_AUDIT_SIGNAL_AT";

/// For the stop-signal tests: `SCIFACT_AUDIT_SIGNAL_AT=<point>:<n>` makes the `n`-th pass through
/// [`point`]`(<point>)` raise SIGTERM after that point's own stop check, and carry on, so that the work must
/// end at the next durable point by the check production code makes there (not by a test's halt loop).
/// Unset, it costs one atomic load.
fn signal_if_asked(name: &str) {
    static TARGET: OnceLock<Option<Target>> = OnceLock::new();
    let Some(target) = TARGET
        .get_or_init(|| {
            let spec = std::env::var(SIGNAL_ENV).ok().filter(|s| !s.is_empty())?;
            let (name, pass) = spec.rsplit_once(':')?;
            Some(Target { name: name.to_owned(), pass: pass.parse().ok()?, seen: AtomicU64::new(0) })
        })
        .as_ref()
    else {
        return;
    };
    if target.name == name && target.seen.fetch_add(1, Ordering::SeqCst) + 1 == target.pass {
        // SAFETY: raising a signal at this process is always sound; its handler only records it.
        unsafe { libc::raise(libc::SIGTERM) };
    }
}
