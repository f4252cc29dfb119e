//! Progress of long stages on stderr: a bar (indicatif) when stderr is a terminal, otherwise a plain line
//! now and then (CI logs, `| tee`, nohup), so a long stage is never silent. Rates and times left count only
//! the work this process does, not what an earlier, interrupted one already did.

use std::cell::{Cell, RefCell};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use scifact_eval::Progress;

/// How often a plain progress line is printed while a stage runs.
const PLAIN_INTERVAL: Duration = Duration::from_secs(10);

/// Progress of the current stage, drawn on stderr.
pub(crate) struct StageProgress {
    terminal: bool,
    bar: RefCell<ProgressBar>,
    stage: RefCell<String>,
    total: Cell<u64>,
    done: Cell<u64>,
    skipped: Arc<AtomicU64>,
    started: Cell<Instant>,
    last_line: Cell<Instant>,
    /// Configuration labels (`c` and 12 hex digits) to the trial names a person knows them by.
    trials: RefCell<Vec<(String, String)>>,
}

impl StageProgress {
    /// Names the configurations a stage's runs are labelled with: a stage `hybrid calibration c1a2…` is said
    /// as `hybrid calibration, trial NAME (c1a2…)`.
    pub(crate) fn name_trials(&self, trials: impl IntoIterator<Item = (String, String)>) {
        self.trials.borrow_mut().extend(trials);
    }

    /// `stage` with a trailing configuration label given its trial's name.
    fn named(&self, stage: &str) -> String {
        let trials = self.trials.borrow();
        let named = stage.rsplit_once(' ').and_then(|(head, label)| {
            trials.iter().find(|(l, _)| l == label).map(|(_, name)| format!("{head}, trial {name} ({label})"))
        });
        named.unwrap_or_else(|| stage.to_owned())
    }
    pub(crate) fn new() -> Self {
        StageProgress {
            terminal: std::io::stderr().is_terminal(),
            bar: RefCell::new(ProgressBar::hidden()),
            stage: RefCell::new(String::new()),
            total: Cell::new(0),
            done: Cell::new(0),
            skipped: Arc::new(AtomicU64::new(0)),
            started: Cell::new(Instant::now()),
            last_line: Cell::new(Instant::now()),
            trials: RefCell::new(Vec::new()),
        }
    }

    /// Says on stderr that a stage without steps begins (plain mode only: a bar would flash and vanish).
    pub(crate) fn note(&self, text: &str) {
        if !self.terminal {
            say(text);
        }
    }

    fn plain_line(&self) {
        let (done, total) = (self.done.get(), self.total.get());
        let fresh = done - self.skipped.load(Ordering::Relaxed);
        let elapsed = self.started.get().elapsed().as_secs_f64();
        let mut text = format!("{}: {done}/{total}", self.stage.borrow());
        if total > 0 {
            text.push_str(&format!(" ({:.0}%)", 100.0 * done as f64 / total as f64));
        }
        if fresh > 0 && elapsed > 0.0 {
            let rate = fresh as f64 / elapsed;
            text.push_str(&format!(", {rate:.1}/s"));
            // The first items are not the rest (the model warms up; texts come longest first): no time is
            // promised before a twentieth is done.
            if fresh * 20 >= total.saturating_sub(done - fresh) {
                text.push_str(&format!(", about {} left", human(total.saturating_sub(done) as f64 / rate)));
            }
        }
        say(&text);
        self.last_line.set(Instant::now());
    }
}

/// The stage in hand and how far it got, for the word said when a stop signal ends the work: the name is set
/// when a stage begins, the counts on every step (no text is made until it is asked for).
static LAST_STAGE: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
static LAST_DONE: AtomicU64 = AtomicU64::new(0);
static LAST_TOTAL: AtomicU64 = AtomicU64::new(0);

/// The stage in hand, as "<stage> (<done>/<total> done)", or empty before the first.
pub(crate) fn last_stage() -> String {
    let stage = LAST_STAGE.lock().map(|s| s.clone()).unwrap_or_default();
    if stage.is_empty() {
        return stage;
    }
    let (done, total) = (LAST_DONE.load(Ordering::Relaxed), LAST_TOTAL.load(Ordering::Relaxed));
    format!("{stage} ({done}/{total} done)")
}

/// A line on stderr, outside any bar.
pub(crate) fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
    let _ = err.flush();
}

fn human(seconds: f64) -> String {
    let seconds = seconds.round() as u64;
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3600, (seconds % 3600) / 60),
    }
}

impl Progress for StageProgress {
    fn start(&self, stage: &str, total: u64) {
        let stage = &self.named(stage);
        *self.stage.borrow_mut() = stage.to_owned();
        self.total.set(total);
        self.done.set(0);
        self.skipped.store(0, Ordering::Relaxed);
        self.started.set(Instant::now());
        if let Ok(mut last) = LAST_STAGE.lock() {
            stage.clone_into(&mut last);
        }
        LAST_DONE.store(0, Ordering::Relaxed);
        LAST_TOTAL.store(total, Ordering::Relaxed);
        if !self.terminal {
            say(&format!("{stage}: {total} to do"));
            self.last_line.set(Instant::now());
            return;
        }
        let bar = ProgressBar::new(total);
        let skipped = Arc::clone(&self.skipped);
        let rate = move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let fresh = state.pos().saturating_sub(skipped.load(Ordering::Relaxed));
            let elapsed = state.elapsed().as_secs_f64();
            if fresh == 0 || elapsed <= 0.0 {
                let _ = write!(w, "eta -");
                return;
            }
            let per_second = fresh as f64 / elapsed;
            let left = state.len().unwrap_or(0).saturating_sub(state.pos()) as f64 / per_second;
            let _ = write!(w, "{per_second:.1}/s, eta {}", human(left));
        };
        if let Ok(style) = ProgressStyle::with_template("{msg:>22} [{bar:40}] {pos}/{len} ({rate_left})") {
            bar.set_style(style.with_key("rate_left", rate).progress_chars("=> "));
        }
        bar.set_message(stage.to_owned());
        *self.bar.borrow_mut() = bar;
    }

    fn advance(&self, steps: u64) {
        self.done.set(self.done.get() + steps);
        LAST_DONE.store(self.done.get(), Ordering::Relaxed);
        if self.terminal {
            self.bar.borrow().inc(steps);
        } else if self.last_line.get().elapsed() >= PLAIN_INTERVAL {
            self.plain_line();
        }
    }

    fn skip(&self, steps: u64) {
        self.done.set(self.done.get() + steps);
        LAST_DONE.store(self.done.get(), Ordering::Relaxed);
        self.skipped.fetch_add(steps, Ordering::Relaxed);
        if self.terminal {
            self.bar.borrow().inc(steps);
        } else if steps > 0 {
            say(&format!("{}: {steps} already done (resumed)", self.stage.borrow()));
        }
    }

    fn finish(&self) {
        if self.terminal {
            self.bar.borrow().finish_and_clear();
            return;
        }
        let fresh = self.done.get() - self.skipped.load(Ordering::Relaxed);
        say(&format!(
            "{}: done, {fresh} in {:.1} s",
            self.stage.borrow(),
            self.started.get().elapsed().as_secs_f64()
        ));
    }
}

/// Where the embedding check's progress is drawn: it runs on the verifier's own threads, so its state is
/// shared, not the stage's.
struct Reembedding {
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
}

/// The embedding check's progress on stderr: a bar with rate and time left on a terminal, otherwise a plain
/// line every 10 s and one when it is done, so a check about as long as building the fixture is never silent.
pub(crate) fn reembedding() -> receipt_verify::EmbeddingProgress {
    let terminal = std::io::stderr().is_terminal();
    let state =
        std::sync::Mutex::new(Reembedding { bar: None, started: Instant::now(), last_line: Instant::now() });
    let stage = "re-embedding every vector";
    receipt_verify::EmbeddingProgress::new(move |done, total| {
        let Ok(mut state) = state.lock() else { return };
        if done == 0 {
            state.started = Instant::now();
            state.last_line = Instant::now();
            if terminal {
                let bar = ProgressBar::new(total);
                if let Ok(style) =
                    ProgressStyle::with_template("{msg:>22} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
                {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_message("re-embedding");
                state.bar = Some(bar);
            } else {
                say(&format!("{stage}: {total} texts to embed"));
            }
            return;
        }
        let elapsed = state.started.elapsed().as_secs_f64();
        if let Some(bar) = &state.bar {
            bar.set_position(done);
            if done >= total {
                bar.finish_and_clear();
            }
        } else if done >= total {
            say(&format!("{stage}: done, {total} texts in {elapsed:.1} s"));
        } else if state.last_line.elapsed() >= PLAIN_INTERVAL {
            let rate = done as f64 / elapsed.max(1e-9);
            say(&format!(
                "{stage}: {done}/{total} ({:.0}%), {rate:.1}/s, about {} left",
                100.0 * done as f64 / total.max(1) as f64,
                human(total.saturating_sub(done) as f64 / rate)
            ));
            state.last_line = Instant::now();
        }
    })
}
