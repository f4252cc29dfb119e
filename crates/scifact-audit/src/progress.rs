//! Progress bars on a terminal (indicatif), nothing at all when stderr is not one (CI, pipes).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use scifact_eval::Progress;

/// One bar per stage, drawn on stderr only when it is a terminal.
pub(crate) struct TerminalProgress {
    bar: std::cell::RefCell<ProgressBar>,
    visible: bool,
}

impl TerminalProgress {
    pub(crate) fn new() -> Self {
        TerminalProgress {
            bar: std::cell::RefCell::new(ProgressBar::hidden()),
            visible: std::io::stderr().is_terminal(),
        }
    }
}

impl Progress for TerminalProgress {
    fn start(&self, stage: &str, total: u64) {
        if !self.visible {
            return;
        }
        let bar = ProgressBar::new(total);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>20} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(stage.to_owned());
        *self.bar.borrow_mut() = bar;
    }

    fn advance(&self, steps: u64) {
        self.bar.borrow().inc(steps);
    }

    fn finish(&self) {
        self.bar.borrow().finish_and_clear();
    }
}
