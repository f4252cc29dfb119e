//! Stopping at a durable point on SIGINT or SIGTERM: the first signal is only recorded, and the work ends at
//! the next [`crate::halt::point`] (every such point is a place where all finished work is on disk, which the
//! crash tests prove by SIGKILLing there). A second signal ends the process at once, as the default would.
//!
//! Commands that write install it; the others keep the default behaviour (an immediate end).

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// What the process says when it stops: set by the binary (it knows what was kept), called with the signal's
/// name.
type Farewell = Box<dyn Fn(&str) + Send + Sync>;

static FAREWELL: Mutex<Option<Farewell>> = Mutex::new(None);

extern "C" fn record(signal: libc::c_int) {
    // Only async-signal-safe work here: an atomic swap, and `_exit` on the second signal.
    if SIGNAL.swap(signal, Ordering::SeqCst) != 0 {
        // SAFETY: `_exit` is async-signal-safe.
        unsafe { libc::_exit(128 + signal) };
    }
}

/// Records SIGINT and SIGTERM instead of dying of them, and sets what the process prints when it stops.
pub fn install(farewell: impl Fn(&str) + Send + Sync + 'static) {
    if let Ok(mut slot) = FAREWELL.lock() {
        *slot = Some(Box::new(farewell));
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only touches an atomic (and calls `_exit`) is valid;
        // SA_RESTART keeps the system calls in progress from failing with EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal received, if a stop was asked for.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The signal's conventional name.
pub fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// Ends the process if a stop was asked for: says so through the farewell, then exits with 128 + the signal
/// (130 for SIGINT, 143 for SIGTERM). Called at durable points only.
pub fn here() {
    let Some(signal) = requested() else { return };
    if let Ok(slot) = FAREWELL.lock()
        && let Some(farewell) = slot.as_ref()
    {
        farewell(name(signal));
    }
    std::process::exit(128 + signal);
}
