//! Checks and their outcome: what every command of this crate returns and `verification.json` holds.

use serde::{Deserialize, Serialize};

/// The verification report schema id.
pub const REPORT_SCHEMA: &str = "scifact-audit-verification-v1";

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Recomputed and equal.
    Pass,
    /// Recomputed and different: the artifact is not eligible for any claim.
    Fail,
    /// Consistent, but short of a publication gate (for example a dirty worktree).
    NotPublishable,
    /// Could not be checked here (the input is gone or was not given); the evidence says which.
    NotChecked,
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// What was checked, for example the aggregate's file name, or `global`.
    pub scope: String,
    /// The check's stable name, for example `metrics.per_query`.
    pub name: String,
    /// Its outcome.
    pub status: Status,
    /// What was compared, or the first difference found.
    pub evidence: String,
}

/// An ordered list of checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Every check, in the order run.
    pub checks: Vec<Check>,
    /// The files the checks were made over, as `(name, hex sha256)` of the bytes read (empty when not
    /// recorded): the subjects of the verdict's in-toto Test Result. Not part of `verification.json`.
    #[serde(skip)]
    pub subjects: Vec<(String, String)>,
}

impl Report {
    /// Records a check.
    pub fn push(&mut self, scope: &str, name: &str, status: Status, evidence: impl Into<String>) {
        self.checks.push(Check { scope: scope.into(), name: name.into(), status, evidence: evidence.into() });
    }

    /// Records `Pass` with `evidence` when `result` is `Ok`, else `Fail` with the error.
    pub fn record(&mut self, scope: &str, name: &str, result: Result<String, String>) {
        match result {
            Ok(evidence) => self.push(scope, name, Status::Pass, evidence),
            Err(evidence) => self.push(scope, name, Status::Fail, evidence),
        }
    }

    /// Appends another report's checks.
    pub fn extend(&mut self, other: Report) {
        self.checks.extend(other.checks);
    }

    /// The failed checks.
    pub fn failures(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| c.status == Status::Fail).collect()
    }

    /// Returns true when nothing failed.
    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// `failed` when any check failed, `not publishable` when any fell short of a gate or could not be
    /// checked, else `publishable`.
    pub fn verdict(&self) -> &'static str {
        if !self.passed() {
            "failed"
        } else if self.checks.iter().all(|c| c.status == Status::Pass) {
            "publishable"
        } else {
            "not publishable"
        }
    }

    /// A short summary for people: the verdict, counts, and every check that did not pass.
    pub fn summary(&self) -> String {
        let count = |status| self.checks.iter().filter(|c| c.status == status).count();
        let mut out = format!(
            "verdict: {} ({} checks: {} pass, {} fail, {} not publishable, {} not checked)\n",
            self.verdict(),
            self.checks.len(),
            count(Status::Pass),
            count(Status::Fail),
            count(Status::NotPublishable),
            count(Status::NotChecked)
        );
        for check in self.checks.iter().filter(|c| c.status != Status::Pass) {
            let status = match check.status {
                Status::Fail => "FAIL",
                Status::NotPublishable => "NOT PUBLISHABLE",
                Status::NotChecked => "NOT CHECKED",
                Status::Pass => "pass",
            };
            out.push_str(&format!(
                "  {status:<15} {} {}: {}\n",
                terminal_safe(&check.scope),
                terminal_safe(&check.name),
                terminal_safe(&check.evidence)
            ));
        }
        out
    }
}

/// `text` with every character that could steer a terminal escaped as `\u{..}`: C0 and C1 controls (escape
/// sequences, carriage returns, backspaces), DEL, and the bidirectional formatting characters that reorder
/// what is displayed. Everything a command prints that came from an input goes through this, so a bundle
/// cannot draw its own verdict line.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let risky = |c: char| {
        c.is_control()
            || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(risky) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if risky(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_bidi_overrides_are_escaped() {
        assert_eq!(terminal_safe("plain ü"), "plain ü");
        assert_eq!(terminal_safe("\u{1b}[2K\rverdict: publishable"), "\\u{1b}[2K\\u{d}verdict: publishable");
        assert_eq!(terminal_safe("a\u{202E}b\u{9b}c\u{7f}"), "a\\u{202e}b\\u{9b}c\\u{7f}");
        let mut report = Report::default();
        report.push("\u{1b}]0;x\u{7}", "n", Status::Fail, "line\nbreak");
        let summary = report.summary();
        assert!(!summary.contains('\u{1b}') && !summary.contains('\u{7}'), "{summary}");
        assert_eq!(
            summary.lines().count(),
            2,
            "an evidence newline cannot start a line of its own: {summary}"
        );
    }
}
