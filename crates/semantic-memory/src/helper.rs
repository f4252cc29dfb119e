//! The helper thread: it runs the vector half of a hybrid search while the caller runs the lexical half, and
//! stays awake between searches.
//!
//! Why not a thread pool: on the virtual machines measured here, waking a sleeping worker took 36 µs at the
//! median, a fifth of a hybrid search, and a caller asleep on the join pays the same again. So both sides spin
//! for at most [`SPIN`] before they sleep: searches that follow each other closely never sleep, and an idle
//! process stops spinning after a millisecond.
//!
//! The job is only offered: a caller that finishes its own half before the helper has taken the job takes it
//! back and runs it, so a helper that is asleep or has lost its CPU to another process costs nothing but the
//! offer.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How long either side spins, waiting for the other, before it sleeps.
const SPIN: Duration = Duration::from_millis(1);

/// A job whose borrows [`join`] keeps alive until it has finished.
type Job = Box<dyn FnOnce() + Send + 'static>;

struct Shared {
    /// The job posted and not yet taken.
    slot: Mutex<Option<Job>>,
    /// Whether `slot` may hold a job: the spinning helper polls this rather than the lock.
    posted: AtomicBool,
    /// Wakes a helper that has stopped spinning.
    wake: Condvar,
    /// Wakes a caller that has stopped spinning; `finished_lock` orders it after the job's `done`.
    finished: Condvar,
    finished_lock: Mutex<()>,
    /// Taken by the one caller the helper serves at a time.
    busy: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Jobs run under `catch_unwind`, so nothing panics while holding these locks; poison would be harmless.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The helper, started on first use; `None` if the thread could not be started.
fn shared() -> Option<&'static Shared> {
    static SHARED: OnceLock<Option<&'static Shared>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            slot: Mutex::new(None),
            posted: AtomicBool::new(false),
            wake: Condvar::new(),
            finished: Condvar::new(),
            finished_lock: Mutex::new(()),
            busy: AtomicBool::new(false),
        }));
        std::thread::Builder::new()
            .name("hybrid-vector".into())
            .spawn(move || serve(shared))
            .ok()
            .map(|_| shared)
    })
}

/// The helper's loop: take a job, run it, spin for the next one, and sleep when none comes.
fn serve(shared: &'static Shared) {
    loop {
        let deadline = Instant::now() + SPIN;
        let job = loop {
            if shared.posted.load(Ordering::Acquire)
                && let Some(job) = take(shared, &mut lock(&shared.slot))
            {
                break job;
            }
            if Instant::now() >= deadline {
                let mut slot = lock(&shared.slot);
                let job = loop {
                    match take(shared, &mut slot) {
                        Some(job) => break job,
                        None => slot = shared.wake.wait(slot).unwrap_or_else(PoisonError::into_inner),
                    }
                };
                break job;
            }
            std::hint::spin_loop();
        };
        job();
    }
}

/// How many jobs their caller ran itself because the helper had not taken them (for the benchmark).
static RECLAIMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many hybrid searches ran their vector half on the calling thread because the helper had not started it
/// by the time the lexical half was done, since the process began (a measurement, for benchmarks).
pub fn hybrid_halves_reclaimed() -> u64 {
    RECLAIMED.load(Ordering::Relaxed)
}

static PARALLEL: AtomicBool = AtomicBool::new(true);

/// Whether hybrid searches offer their vector half to the helper thread (the default) or run both halves one
/// after the other on the calling thread. Rankings, scores and receipts are the same either way; benchmarks
/// use it to time the sequential reference.
pub fn set_hybrid_parallel(enabled: bool) {
    PARALLEL.store(enabled, Ordering::Relaxed);
}

fn take(shared: &Shared, slot: &mut Option<Job>) -> Option<Job> {
    let job = slot.take();
    if job.is_some() {
        shared.posted.store(false, Ordering::Release);
    }
    job
}

/// Runs `there` on the helper thread and `here` on this one, at once, and returns both results. It returns
/// only after `there` has finished, even when `here` panics; a panic in `there` is resumed here. If the helper
/// is serving another caller, or could not be started, both run here, one after the other.
pub(crate) fn join<A, B>(there: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B)
where
    A: Send,
{
    let parallel = PARALLEL.load(Ordering::Relaxed);
    let Some(shared) = shared().filter(|shared| parallel && !shared.busy.swap(true, Ordering::Acquire))
    else {
        let a = there();
        return (a, here());
    };
    let done = AtomicBool::new(false);
    let mut result: Option<std::thread::Result<A>> = None;
    let b = {
        let (result, done) = (&mut result, &done);
        let task = move || {
            *result = Some(panic::catch_unwind(AssertUnwindSafe(there)));
            done.store(true, Ordering::Release);
            // Past `done`, the job touches only `shared`, which is never freed.
            let _order = lock(&shared.finished_lock);
            shared.finished.notify_all();
        };
        let job: Box<dyn FnOnce() + Send + '_> = Box::new(task);
        // SAFETY: the job borrows `there`'s captures, `result` and `done`, all of which outlive this block;
        // `Finish` does not let the block end, by return or by unwinding, until the helper has set `done`,
        // and after setting it the job no longer touches them.
        let job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
        let finish = Finish { shared, done };
        *lock(&shared.slot) = Some(job);
        shared.posted.store(true, Ordering::Release);
        shared.wake.notify_one();
        let b = here();
        // A helper that has not taken the job by now (asleep, or its CPU taken by another process) would only
        // make this caller wait: the caller runs it itself, so a hybrid search is never slower than its two
        // halves in sequence.
        let unclaimed = take(shared, &mut lock(&shared.slot));
        if let Some(job) = unclaimed {
            RECLAIMED.fetch_add(1, Ordering::Relaxed);
            job();
        }
        drop(finish);
        b
    };
    match result {
        Some(Ok(a)) => (a, b),
        Some(Err(payload)) => panic::resume_unwind(payload),
        None => unreachable!("`done` is set only after the result"),
    }
}

/// Waits, when dropped, until the posted job has set `done`, then frees the helper for the next caller.
struct Finish<'a> {
    shared: &'static Shared,
    done: &'a AtomicBool,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let deadline = Instant::now() + SPIN;
        while !self.done.load(Ordering::Acquire) {
            if Instant::now() >= deadline {
                let mut order = lock(&self.shared.finished_lock);
                while !self.done.load(Ordering::Acquire) {
                    order = self
                        .shared
                        .finished
                        .wait_timeout(order, SPIN)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                break;
            }
            std::hint::spin_loop();
        }
        self.shared.busy.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_halves_run_and_borrow_from_the_caller() {
        let data: Vec<u64> = (0..10_000).collect();
        for round in 0..200u64 {
            let (a, b) = join(|| data.iter().sum::<u64>() + round, || data.len() as u64 * round);
            assert_eq!((a, b), (49_995_000 + round, 10_000 * round));
        }
    }

    #[test]
    fn a_panic_on_the_helper_reaches_the_caller_and_the_helper_serves_on() {
        let caught = panic::catch_unwind(|| join(|| panic!("there"), || 1));
        assert!(caught.is_err());
        assert_eq!(join(|| 2, || 3), (2, 3));
    }

    #[test]
    fn a_panic_here_waits_for_the_helper_before_unwinding() {
        let finished = AtomicBool::new(false);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            join(
                || {
                    std::thread::sleep(Duration::from_millis(20));
                    finished.store(true, Ordering::SeqCst);
                },
                || panic!("here"),
            )
        }));
        assert!(caught.is_err());
        assert!(
            finished.load(Ordering::SeqCst),
            "the caller unwound while the helper still borrowed its frame"
        );
    }

    #[test]
    fn callers_on_many_threads_all_get_their_own_answers() {
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                scope.spawn(move || {
                    for round in 0..500 {
                        let key = thread * 1_000 + round;
                        assert_eq!(join(|| key * 2, || key + 1), (key * 2, key + 1));
                    }
                });
            }
        });
    }

    #[test]
    fn a_helper_asleep_after_a_pause_is_woken() {
        assert_eq!(join(|| 1, || 2), (1, 2));
        std::thread::sleep(SPIN * 5);
        assert_eq!(join(|| 3, || 4), (3, 4));
    }
}
