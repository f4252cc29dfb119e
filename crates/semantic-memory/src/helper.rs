//! The helper thread: it runs the vector half of a hybrid search while the caller runs the lexical half, takes
//! a share of a vector search's first pass, and stays awake between searches.
//!
//! Why not a thread pool: on the virtual machines measured here, waking a sleeping worker took 36 µs at the
//! median, a fifth of a hybrid search, and a caller asleep on the join pays the same again. So both sides spin
//! for at most [`SPIN`] before they sleep: searches that follow each other closely never sleep, and an idle
//! process stops spinning after a millisecond.
//!
//! The job is only offered: a caller that finishes its own half before the helper has taken the job takes it
//! back and runs it, so a helper that is asleep or has lost its CPU to another process costs nothing but the
//! offer. A first pass is shared by slices ([`share`]): the helper takes them from the back while the caller
//! takes them from the front, so a helper that starts late only takes fewer.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
            .name("search-helper".into())
            .spawn(move || serve(shared))
            .ok()
            .map(|_| shared)
    })
}

/// The helper's loop: take a job, run it, spin for the next one (while spinning pays, see [`Policy`]), and
/// sleep when none comes.
fn serve(shared: &'static Shared) {
    loop {
        let spinning_pays = POLICY.spin.load(Ordering::Relaxed) || SHARE_POLICY.spin.load(Ordering::Relaxed);
        let spin = if spinning_pays { SPIN } else { Duration::ZERO };
        let deadline = Instant::now() + spin;
        let job = loop {
            if shared.posted.load(Ordering::Acquire)
                && let Some(job) = claim(shared, &mut lock(&shared.slot))
            {
                break job;
            }
            if Instant::now() >= deadline {
                let mut slot = lock(&shared.slot);
                let job = loop {
                    match claim(shared, &mut slot) {
                        Some(job) => break job,
                        // A timeout, so that a wake-up lost to a reclaimed job cannot strand a posted one.
                        None => {
                            slot = shared
                                .wake
                                .wait_timeout(slot, SPIN)
                                .unwrap_or_else(PoisonError::into_inner)
                                .0;
                        }
                    }
                };
                break job;
            }
            std::hint::spin_loop();
        };
        job();
    }
}

/// When to use the helper, learnt from the searches themselves, so that the answer holds on a quiet machine
/// and beside a compiler alike.
///
/// - The helper spins between jobs only while it takes nearly every job of one kind in time. When its CPU is
///   taken by other processes it misses jobs (the caller reclaims them), and a spinning helper would only take
///   CPU from the caller: then it sleeps between jobs instead.
/// - Both ways of running a search are timed, wall clock, start to end: every parallel search, and the searches
///   run in sequence (one in [`PROBE_EVERY`] even while parallelism wins, so that cost stays measured), and
///   each way's median is tracked ([`median`]). While the parallel searches' median exceeds the sequential
///   ones', the next [`SEQUENTIAL_RUN`] searches run in sequence; then parallelism is tried again, the first
///   [`WARMING`] searches not counted (they wake the helper), its median starting from three quarters of the
///   sequential one: the benefit of the doubt, since on a quiet machine it wins by more than that.
/// - Medians, not means, for hybrid searches: in the runner on a noisy virtual machine, parallel searches that
///   stalled for a millisecond or more (a page fault, a preempted thread) lifted the parallel mean to the
///   sequential one while most parallel searches took 0.12-0.3 ms against 0.2-0.4 in sequence; a mean sent
///   hundreds of searches into sequence, each slower than the parallel searches it replaced. The median's
///   steps are larger for the first searches tried after a run in sequence, so a machine that stays busy
///   still moves it within a few searches. (A shared first pass compares means: see
///   [`Policy::counting_stalls`].)
///
/// Measured, not estimated: an earlier policy compared each parallel search with its halves' CPU times, but in
/// the runner the halves run in sequence cost nearly twice that sum (each half, on its own core, keeps its own
/// caches warm), so the estimate put parallelism barely ahead and one stall tipped it.
struct Policy {
    /// Whether the estimates are means (stalls count) rather than medians.
    stalls_count: bool,
    spin: AtomicBool,
    /// Recent share of jobs reclaimed, in 1/65536 (an exponentially weighted mean over about 16 jobs).
    reclaimed: AtomicU64,
    /// Recent wall time of parallel searches (median, or mean when stalls count), in ns (0: none since the last
    /// run in sequence).
    parallel: AtomicU64,
    /// Parallel searches since the start or the last run in sequence.
    counted: AtomicU64,
    /// Recent wall time of searches run in sequence by the policy (median, or mean when stalls count), in ns
    /// (0: none yet).
    sequential: AtomicU64,
    /// Searches left to run in sequence.
    left: AtomicU64,
    /// Searches the policy was asked about, for its probes.
    asked: AtomicU64,
}

/// Searches run in sequence after parallelism was found to lose, before it is tried again.
const SEQUENTIAL_RUN: u64 = 256;
/// One search in this many runs in sequence while parallelism wins: the measure of what it wins against.
const PROBE_EVERY: u64 = 64;
/// Parallel searches not counted after the start or a run in sequence: they find the helper asleep and its
/// caches cold (the first after a run took 0.5–1.2 ms in the runner, against 0.17 warm).
const WARMING: u64 = 2;

/// The policy of hybrid searches (their vector half offered to the helper).
static POLICY: Policy = Policy::new();
/// The policy of shared first passes, learnt apart: a first pass can be shorter than the time a sleeping helper
/// takes to wake, and what it learns must not make the next hybrid searches run in sequence.
static SHARE_POLICY: Policy = Policy::counting_stalls();

/// The next estimate of a median from `estimate` and a new `sample`: a step of 1/`fraction` of the estimate
/// towards the sample, whatever its size (so the estimate settles where half the samples lie above it, and one
/// stall moves it as little as any other search); the sample itself when there is no estimate yet.
fn median(estimate: u64, sample: u64, fraction: u64) -> u64 {
    let step = estimate / fraction + 1;
    match estimate {
        0 => sample.max(1),
        _ if sample > estimate => estimate + step,
        _ if sample < estimate => estimate.saturating_sub(step).max(1),
        _ => estimate,
    }
}

/// The next estimate of a mean from `estimate` and a new `sample`, weighted 1/`fraction` (a sample counting for
/// at most sixteen times the estimate); the sample itself when there is no estimate yet.
fn mean(estimate: u64, sample: u64, fraction: u64) -> u64 {
    match estimate {
        0 => sample.max(1),
        _ => (estimate - estimate / fraction + sample.min(16 * estimate) / fraction).max(1),
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX / 4)
}

impl Policy {
    /// A policy that compares medians (a hybrid search's).
    const fn new() -> Policy {
        Policy {
            stalls_count: false,
            spin: AtomicBool::new(true),
            reclaimed: AtomicU64::new(0),
            parallel: AtomicU64::new(0),
            counted: AtomicU64::new(0),
            sequential: AtomicU64::new(0),
            left: AtomicU64::new(0),
            asked: AtomicU64::new(0),
        }
    }

    /// A policy that compares means, in which a stall counts (a shared first pass's): its gain is a few
    /// microseconds, and a helper preempted in the middle of a slice makes the caller wait for a millisecond,
    /// one search in twenty beside a CPU-bound neighbour, which a median does not see.
    const fn counting_stalls() -> Policy {
        Policy { stalls_count: true, ..Policy::new() }
    }

    /// Whether this search should run its halves in sequence: in a run after parallelism lost, or as a probe.
    fn sequential(&self) -> bool {
        let probe = self.asked.fetch_add(1, Ordering::Relaxed).is_multiple_of(PROBE_EVERY);
        let chosen = probe
            || self.left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok();
        if chosen {
            IN_SEQUENCE.fetch_add(1, Ordering::Relaxed);
        }
        chosen
    }

    /// The next estimate after `estimate` given one search that took `total`: this policy's kind of estimate,
    /// each search weighing 1/`fraction`.
    fn next(&self, estimate: u64, total: Duration, fraction: u64) -> u64 {
        if self.stalls_count {
            mean(estimate, nanos(total), fraction)
        } else {
            median(estimate, nanos(total), fraction)
        }
    }

    /// Learns from one search the policy ran in sequence: how long it took.
    fn learn_sequential(&self, total: Duration) {
        let estimate = self.sequential.load(Ordering::Relaxed);
        self.sequential.store(self.next(estimate, total, 32), Ordering::Relaxed);
    }

    /// Learns from one parallel search: whether its job was reclaimed, and how long the whole took.
    fn learn(&self, reclaimed: bool, total: Duration) {
        let share = self.reclaimed.load(Ordering::Relaxed);
        let sample = if reclaimed { 65_536 } else { 0 };
        let share = share - share / 16 + sample / 16;
        self.reclaimed.store(share, Ordering::Relaxed);
        // Spin while fewer than 1 job in 20 is missed; sleep once more than 1 in 10 is.
        if share > 65_536 / 10 {
            self.spin.store(false, Ordering::Relaxed);
        } else if share < 65_536 / 20 {
            self.spin.store(true, Ordering::Relaxed);
        }
        let counted = self.counted.fetch_add(1, Ordering::Relaxed);
        if counted < WARMING {
            return;
        }
        let sequential = self.sequential.load(Ordering::Relaxed);
        let estimate = match self.parallel.load(Ordering::Relaxed) {
            0 => sequential - sequential / 4,
            estimate => estimate,
        };
        // Steps of an eighth while parallelism is being tried again, so a machine still busy is found within
        // three or four searches; of a thirty-second once it has held.
        let fraction = if counted < WARMING + 8 { 8 } else { 32 };
        let parallel = self.next(estimate, total, fraction);
        if sequential != 0 && parallel > sequential {
            self.left.store(SEQUENTIAL_RUN, Ordering::Relaxed);
            self.parallel.store(0, Ordering::Relaxed);
            self.counted.store(0, Ordering::Relaxed);
        } else {
            self.parallel.store(parallel, Ordering::Relaxed);
        }
    }
}

static RECLAIMED: AtomicU64 = AtomicU64::new(0);

/// How many jobs offered to the helper their caller ran itself because the helper had not started them in time
/// (a hybrid search's vector half, or what was left of a shared first pass), since the process began (a
/// measurement, for benchmarks).
pub fn helper_jobs_reclaimed() -> u64 {
    RECLAIMED.load(Ordering::Relaxed)
}

static IN_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// How many searches the helper's policy ran on the calling thread alone, because parallelism had been losing
/// or as probes of what a search in sequence costs, since the process began (a measurement, for benchmarks).
pub fn searches_in_sequence() -> u64 {
    IN_SEQUENCE.load(Ordering::Relaxed)
}

static PARALLEL: AtomicBool = AtomicBool::new(true);

/// Whether searches use the helper thread (the default: a hybrid search's vector half, a share of a vector
/// search's first pass) or run wholly on the calling thread. Rankings, scores and receipts are the same either
/// way; benchmarks use it to time the sequential reference.
pub fn set_parallel_search(enabled: bool) {
    PARALLEL.store(enabled, Ordering::Relaxed);
}

/// The helper's [`take`]; a test can pause it, as a helper without a CPU would be.
fn claim(shared: &Shared, slot: &mut Option<Job>) -> Option<Job> {
    #[cfg(test)]
    if tests::HELPER_PAUSED.load(Ordering::Relaxed) {
        return None;
    }
    take(shared, slot)
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
    join_with(&POLICY, there, here)
}

/// [`join`], learning from and consulting `policy`.
fn join_with<A, B>(policy: &Policy, there: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B)
where
    A: Send,
{
    // A call inside a job (a hybrid search's vector half sharing its first pass) finds the helper taken, or is
    // inside a search the policy already runs in sequence: either way it runs here, and it never uses up one of
    // the policy's searches in sequence.
    let free = shared().filter(|shared| {
        PARALLEL.load(Ordering::Relaxed)
            && !IN_SEQUENCE_HERE.get()
            && !shared.busy.swap(true, Ordering::Acquire)
    });
    let mut chosen = false;
    let Some(shared) = free.filter(|shared| {
        chosen = policy.sequential();
        if chosen {
            shared.busy.store(false, Ordering::Release);
        }
        !chosen
    }) else {
        let started = chosen.then(Instant::now);
        let _alone = InSequenceHere::enter();
        let a = there();
        let b = here();
        if let Some(started) = started {
            policy.learn_sequential(started.elapsed());
        }
        return (a, b);
    };
    let started = Instant::now();
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
        // make this caller wait: the caller runs it itself.
        let unclaimed = take(shared, &mut lock(&shared.slot));
        let reclaimed = unclaimed.is_some();
        if let Some(job) = unclaimed {
            RECLAIMED.fetch_add(1, Ordering::Relaxed);
            job();
        }
        drop(finish);
        policy.learn(reclaimed, started.elapsed());
        b
    };
    match result {
        Some(Ok(a)) => (a, b),
        Some(Err(payload)) => panic::resume_unwind(payload),
        None => unreachable!("`done` is set only after the result"),
    }
}

/// Runs `work(0)` … `work(slices - 1)`, each once, shared between this thread and the helper: this thread takes
/// slices from the front and the helper from the back until none is left, so a helper that starts late (or
/// never) only takes fewer. Through [`join`]: all here while the policy says so, or when the helper serves
/// another caller (as it does when this runs inside a hybrid search's vector half).
pub(crate) fn share(slices: usize, work: impl Fn(usize) + Sync) {
    share_with(&SHARE_POLICY, slices, work);
}

/// [`share`], learning from and consulting `policy`.
fn share_with(policy: &Policy, slices: usize, work: impl Fn(usize) + Sync) {
    // One slice cannot be shared; past 2³² the counter below cannot count them.
    if slices <= 1 || u32::try_from(slices).is_err() {
        (0..slices).for_each(work);
        return;
    }
    // How many were taken from the front (low 32 bits) and from the back (high 32 bits): each thread keeps to its
    // end of the data from one call to the next, where its cache may still hold it.
    let taken = AtomicU64::new(0);
    let claim = |back: bool| -> Option<usize> {
        let mut current = taken.load(Ordering::Relaxed);
        loop {
            let (front, behind) = (current & 0xffff_ffff, current >> 32);
            if (front + behind) as usize >= slices {
                return None;
            }
            let next = if back { current + (1 << 32) } else { current + 1 };
            match taken.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(if back { slices - 1 - behind as usize } else { front as usize }),
                Err(now) => current = now,
            }
        }
    };
    let drain = |back: bool| {
        while let Some(slice) = claim(back) {
            work(slice);
        }
    };
    join_with(policy, || drain(true), || drain(false));
}

thread_local! {
    /// Whether this thread is running both halves of a search itself, so calls within it need not ask.
    static IN_SEQUENCE_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as running a search's halves itself until dropped (by return or unwinding).
struct InSequenceHere(bool);

impl InSequenceHere {
    fn enter() -> InSequenceHere {
        InSequenceHere(IN_SEQUENCE_HERE.replace(true))
    }
}

impl Drop for InSequenceHere {
    fn drop(&mut self) {
        IN_SEQUENCE_HERE.set(self.0);
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

    /// Keeps the helper from taking jobs, as a helper without a CPU would.
    pub(super) static HELPER_PAUSED: AtomicBool = AtomicBool::new(false);
    /// Held by a test that pauses the helper, or needs it not paused.
    static PAUSING: Mutex<()> = Mutex::new(());

    #[test]
    fn a_job_the_helper_has_not_taken_is_run_by_its_caller() {
        let _pausing = lock(&PAUSING);
        let _ = join(|| 0, || 0);
        HELPER_PAUSED.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2));
        let caller = std::thread::current().id();
        // Other tests share the helper (a busy helper, or a policy run in sequence, also runs both halves
        // here): try until this caller's job is the one reclaimed.
        let mut reclaimed = false;
        for _ in 0..2_000 {
            let before = helper_jobs_reclaimed();
            let started = Instant::now();
            let (there, here) = join(|| std::thread::current().id(), || std::thread::current().id());
            assert_eq!((there, here), (caller, caller), "the paused helper ran nothing");
            if helper_jobs_reclaimed() > before {
                assert!(
                    started.elapsed() < Duration::from_millis(50),
                    "the caller did not wait for the helper"
                );
                reclaimed = true;
                break;
            }
        }
        HELPER_PAUSED.store(false, Ordering::Relaxed);
        assert!(reclaimed, "no job was ever reclaimed");
        assert_eq!(join(|| 5, || 6), (5, 6), "the helper serves on");
    }

    /// Runs `searches` searches through `policy` as `join_with` would, each taking `parallel(i, warm)` in
    /// parallel (`warm`: parallel searches since the last one in sequence) or `sequential` in sequence; returns
    /// which ran in sequence.
    fn simulate(
        policy: &Policy,
        searches: usize,
        parallel: impl Fn(usize, usize) -> u64,
        sequential: u64,
    ) -> Vec<bool> {
        let us = Duration::from_micros;
        let mut warm = 0;
        (0..searches)
            .map(|i| {
                let in_sequence = policy.sequential();
                if in_sequence {
                    policy.learn_sequential(us(sequential));
                    warm = 0;
                } else {
                    policy.learn(false, us(parallel(i, warm)));
                    warm += 1;
                }
                in_sequence
            })
            .collect()
    }

    #[test]
    fn the_policy_sleeps_the_helper_when_it_misses_jobs() {
        let policy = Policy::new();
        let us = Duration::from_micros;
        for _ in 0..64 {
            policy.learn(false, us(100));
        }
        assert!(policy.spin.load(Ordering::Relaxed));
        // Jobs missed one in three: the helper stops spinning between jobs.
        for round in 0..64 {
            policy.learn(round % 3 == 0, us(100));
        }
        assert!(!policy.spin.load(Ordering::Relaxed));
        // Caught up: missing no jobs, the helper spins again.
        for _ in 0..64 {
            policy.learn(false, us(100));
        }
        assert!(policy.spin.load(Ordering::Relaxed));
    }

    #[test]
    fn the_policy_runs_in_sequence_while_parallel_loses_and_only_then() {
        let probes = |ran: &[bool]| ran.iter().filter(|s| **s).count();
        // Parallel winning (170 µs against 300 in sequence), though the searches just after one in sequence
        // find the helper cold (800, 600, then 400 µs): only the probes run in sequence.
        let policy = Policy::new();
        let cold = |_, warm| [800, 600, 400].get(warm).copied().unwrap_or(170);
        let ran = simulate(&policy, 1_024, cold, 300);
        assert_eq!(probes(&ran) as u64, 1_024 / PROBE_EVERY, "a cold search tipped the policy");
        // A stall of a millisecond now and then (one search in 50) against a narrower margin (200 µs in
        // sequence) changes nothing either.
        let ran = simulate(&policy, 1_024, |i, _| if i % 50 == 7 { 1_200 } else { 170 }, 200);
        assert_eq!(probes(&ran) as u64, 1_024 / PROBE_EVERY, "a stall tipped the policy");
        // A machine that turns busy (parallel 1.5 ms against 250): within a few searches, a run in sequence.
        let ran = simulate(&policy, 1_024, |_, _| 1_500, 250);
        let run = ran.windows(SEQUENTIAL_RUN as usize).position(|w| w.iter().all(|s| *s));
        assert!(run.is_some_and(|at| at <= 16), "no run in sequence soon: {run:?}");
        // While it stays busy, only the searches that judge parallelism again run in parallel.
        let parallel = ran.len() - probes(&ran);
        let per_run = WARMING as usize + 4;
        assert!(
            parallel <= 16 + per_run * 1_024 / SEQUENTIAL_RUN as usize,
            "{parallel} parallel while losing"
        );
        // Quiet again: parallelism is back after the run in sequence under way.
        let ran = simulate(&policy, 1_024, cold, 300);
        let back = ran.iter().position(|s| !*s).unwrap_or(usize::MAX);
        assert!(back <= SEQUENTIAL_RUN as usize, "parallelism back only after {back}");
        assert!(probes(&ran[back..]) as u64 <= (ran.len() - back) as u64 / PROBE_EVERY + 1);
    }

    #[test]
    fn a_shared_first_pass_counts_its_stalls() {
        // Parallel 25 µs against 30 in sequence, but one share in twenty waits a millisecond and a half for a
        // preempted helper: a mean of 98 µs. Runs in sequence follow; a median would never see it.
        let stalled = |i: usize, _| if i % 20 == 3 { 1_500 } else { 25 };
        let ran = simulate(&Policy::counting_stalls(), 2_048, stalled, 30);
        let in_sequence = ran.iter().filter(|s| **s).count();
        assert!(in_sequence > 2_048 / 2, "{in_sequence} in sequence");
        let ran = simulate(&Policy::new(), 2_048, stalled, 30);
        assert_eq!(ran.iter().filter(|s| **s).count() as u64, 2_048 / PROBE_EVERY);
        assert_eq!(mean(0, 40, 16), 40);
        assert_eq!(mean(160, 1_000_000, 16), 160 - 10 + 160);
    }

    #[test]
    fn the_estimate_settles_on_the_median_and_a_stall_moves_it_one_step() {
        assert_eq!(median(0, 500, 32), 500, "no estimate yet: the sample alone");
        assert_eq!(median(0, 0, 32), 1, "an estimate is never 0, which means none");
        assert_eq!(median(320, 1_000_000, 32), 331, "a stall moves it one step");
        assert_eq!(median(320, 0, 32), 309);
        assert_eq!(median(320, 320, 32), 320);
        assert_eq!(median(320, 1_000_000, 8), 361);
        // Three searches in five at 170 µs, two at 2 ms: the mean is 902, the median 170.
        let mut estimate = 1_000;
        for i in 0..2_000 {
            estimate = median(estimate, if i % 5 < 3 { 170 } else { 2_000 }, 32);
        }
        assert!((165..=185).contains(&estimate), "{estimate}");
    }

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

    #[test]
    fn a_share_runs_every_slice_once_the_caller_from_the_front_the_helper_from_the_back() {
        use std::sync::atomic::AtomicU32;
        let caller = std::thread::current().id();
        for slices in [0, 1, 2, 37] {
            let runs: Vec<AtomicU32> = (0..slices).map(|_| AtomicU32::new(0)).collect();
            share(slices, |slice| {
                runs[slice].fetch_add(1, Ordering::Relaxed);
            });
            assert!(runs.iter().all(|n| n.load(Ordering::Relaxed) == 1), "{slices} slices");
        }
        // Slow slices, so that the helper takes some: the caller's are a prefix, the helper's the rest.
        let _pausing = lock(&PAUSING);
        let mut helped = false;
        for _ in 0..50 {
            // Other tests' shares may have set the policy running them in sequence.
            SHARE_POLICY.left.store(0, Ordering::Relaxed);
            let by: Vec<Mutex<Option<std::thread::ThreadId>>> = (0..24).map(|_| Mutex::new(None)).collect();
            share(by.len(), |slice| {
                std::thread::sleep(Duration::from_micros(200));
                *lock(&by[slice]) = Some(std::thread::current().id());
            });
            let by: Vec<std::thread::ThreadId> =
                by.iter().map(|m| lock(m).expect("every slice ran")).collect();
            let front = by.iter().take_while(|id| **id == caller).count();
            assert!(
                by[front..].iter().all(|id| *id != caller),
                "the caller took a slice from the back: {by:?}"
            );
            if front < by.len() {
                helped = true;
                break;
            }
        }
        assert!(helped, "the helper never took a slice");
    }

    #[test]
    fn a_search_run_in_sequence_runs_its_inner_calls_here_without_asking_the_policy_again() {
        let policy = Policy::new();
        policy.left.store(5, Ordering::Relaxed);
        policy.asked.store(1, Ordering::Relaxed); // not a probe
        let caller = std::thread::current().id();
        let (inner, outer) = join_with(
            &policy,
            || join_with(&policy, || std::thread::current().id(), || std::thread::current().id()),
            || std::thread::current().id(),
        );
        assert_eq!((inner, outer), ((caller, caller), caller));
        // One search in sequence (none, if another test's search had the helper): never two.
        assert!(policy.left.load(Ordering::Relaxed) >= 4, "the inner call used up a search in sequence");
        assert!(policy.asked.load(Ordering::Relaxed) <= 2, "the inner call asked the policy");
        assert!(!IN_SEQUENCE_HERE.get(), "the mark outlived the search");
    }

    #[test]
    fn shares_the_helper_misses_are_run_in_sequence_for_a_while() {
        let _pausing = lock(&PAUSING);
        let policy = Policy::new();
        let _ = join(|| 0, || 0);
        HELPER_PAUSED.store(true, Ordering::Relaxed);
        let mut learnt = false;
        for _ in 0..2_000 {
            share_with(&policy, 3, |_| {});
            if policy.left.load(Ordering::Relaxed) > 0 {
                learnt = true;
                break;
            }
        }
        HELPER_PAUSED.store(false, Ordering::Relaxed);
        assert!(learnt, "shares the helper never took did not send the next ones in sequence");
    }
}
