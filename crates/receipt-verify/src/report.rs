//! Checks, what each rests on, and the verdict: what every command of this crate returns and
//! `verification.json` holds.
//!
//! A check says two things. Its [`Basis`]: was it *recomputed* by this verifier from the bundle's bytes and
//! public inputs (the SciFact archive, the model), is it *attested* (the signer's own statement, which no one
//! can recompute: self-reported times, git state, host, latency), or was it *not checked* here (an input that
//! would let it be recomputed was not given)? And its [`Status`]: how it came out. `pass` is only ever said of
//! something recomputed; a consistent attestation is `attested`, never `pass`.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The verification report schema id. Version 2 adds each check's basis and the `verified` verdict.
pub const REPORT_SCHEMA: &str = "scifact-audit-verification-v2";

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Recomputed and equal.
    Pass,
    /// The signer's statement, consistent with everything else, and not recomputable by anyone.
    Attested,
    /// Recomputed and different, or an attestation that contradicts the bundle: no claim stands.
    Fail,
    /// Consistent, but short of a publication gate (for example a dirty worktree).
    NotPublishable,
    /// Not checked here (an input was not given); the evidence says which, and what it would take.
    NotChecked,
}

impl Status {
    /// The word the summary prints.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Attested => "ATTESTED",
            Status::Fail => "FAIL",
            Status::NotPublishable => "NOT PUBLISHABLE",
            Status::NotChecked => "NOT CHECKED",
        }
    }
}

/// What a check rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Recomputed by this verifier from the bundle (or output directory) and public inputs.
    Recomputed,
    /// The signer's word: it can be read and checked for consistency, never recomputed.
    Attested,
    /// Could be recomputed with an input that was not given here.
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
    /// What it rests on.
    pub basis: Basis,
    /// What was compared, or the first difference found.
    pub evidence: String,
}

/// The verdict over every check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// A check failed: the artifact supports no claim.
    Failed,
    /// Nothing failed, but a publication gate was not met (a dirty worktree, say).
    NotPublishable,
    /// Nothing failed and every gate was met, but some number rests on the signer because an input that would
    /// let it be recomputed was not given (the summary says which).
    Publishable,
    /// Every number a reader sees (rankings, scores, metrics, intervals, p-values, the selection, the report)
    /// was recomputed; what remains is attested and labelled so.
    Verified,
}

impl Verdict {
    /// The verdict as `verification.json`, the summary and the in-toto Test Result write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Failed => "failed",
            Verdict::NotPublishable => "not publishable",
            Verdict::Publishable => "publishable",
            Verdict::Verified => "verified",
        }
    }

    /// Reads a verdict as [`Verdict::as_str`] writes it (and as version 1 reports did).
    pub fn parse(text: &str) -> Option<Verdict> {
        [Verdict::Failed, Verdict::NotPublishable, Verdict::Publishable, Verdict::Verified]
            .into_iter()
            .find(|v| v.as_str() == text)
    }

    /// One line on what the verdict means.
    pub fn meaning(self) -> &'static str {
        match self {
            Verdict::Failed => "a check failed: no claim of this bundle stands",
            Verdict::NotPublishable => "consistent, but a publication gate was not met",
            Verdict::Publishable => {
                "nothing failed, but some numbers rest on the signer: the checks below were not recomputed here"
            }
            Verdict::Verified => {
                "every ranking, score, metric, interval, p-value, the selection and the report were recomputed; \
                 what is attested is the signer's word and is labelled so"
            }
        }
    }
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
    /// Lines a person needs besides the checks (the embedding sample's seed, say), printed first.
    #[serde(skip)]
    pub notes: Vec<String>,
}

impl Report {
    /// Records a check with its outcome and basis.
    pub fn push(
        &mut self,
        scope: &str,
        name: &str,
        status: Status,
        basis: Basis,
        evidence: impl Into<String>,
    ) {
        self.checks.push(Check {
            scope: scope.into(),
            name: name.into(),
            status,
            basis,
            evidence: evidence.into(),
        });
    }

    /// Records a recomputation: `Pass` with `evidence` when `result` is `Ok`, else `Fail` with the error.
    pub fn record(&mut self, scope: &str, name: &str, result: Result<String, String>) {
        match result {
            Ok(evidence) => self.push(scope, name, Status::Pass, Basis::Recomputed, evidence),
            Err(evidence) => self.push(scope, name, Status::Fail, Basis::Recomputed, evidence),
        }
    }

    /// Records an attestation: `Attested` when `result` is `Ok` (consistent), else `Fail`.
    pub fn attest(&mut self, scope: &str, name: &str, result: Result<String, String>) {
        match result {
            Ok(evidence) => self.push(scope, name, Status::Attested, Basis::Attested, evidence),
            Err(evidence) => self.push(scope, name, Status::Fail, Basis::Attested, evidence),
        }
    }

    /// Records a check that could not be made here, and why.
    pub fn not_checked(&mut self, scope: &str, name: &str, reason: impl Into<String>) {
        self.push(scope, name, Status::NotChecked, Basis::NotChecked, reason);
    }

    /// Appends another report's checks and notes.
    pub fn extend(&mut self, other: Report) {
        self.checks.extend(other.checks);
        self.notes.extend(other.notes);
    }

    /// The failed checks.
    pub fn failures(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| c.status == Status::Fail).collect()
    }

    /// Returns true when nothing failed.
    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// The verdict: `failed` if any check failed, `not publishable` if any missed a gate, `publishable` if any
    /// was not checked, else `verified`.
    pub fn verdict(&self) -> Verdict {
        let any = |status| self.checks.iter().any(|c| c.status == status);
        if any(Status::Fail) {
            Verdict::Failed
        } else if any(Status::NotPublishable) {
            Verdict::NotPublishable
        } else if any(Status::NotChecked) {
            Verdict::Publishable
        } else {
            Verdict::Verified
        }
    }

    /// How many checks have each status, in [`Status`] order.
    pub fn counts(&self) -> [(Status, usize); 5] {
        [Status::Pass, Status::Attested, Status::NotChecked, Status::NotPublishable, Status::Fail]
            .map(|status| (status, self.checks.iter().filter(|c| c.status == status).count()))
    }

    /// A summary for people: the verdict and what it means, the counts by basis, every failure, then what rests
    /// on the signer (not checked here, and attested), each finding once with the scopes it holds in.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for note in &self.notes {
            let _ = writeln!(out, "{}", terminal_safe(note));
        }
        let verdict = self.verdict();
        let count = |status: Status| self.checks.iter().filter(|c| c.status == status).count();
        let _ = writeln!(
            out,
            "verdict: {} ({} checks: {} recomputed and equal, {} attested, {} not checked, {} not publishable, {} failed)",
            verdict.as_str(),
            self.checks.len(),
            count(Status::Pass),
            count(Status::Attested),
            count(Status::NotChecked),
            count(Status::NotPublishable),
            count(Status::Fail),
        );
        let _ = writeln!(out, "  {}", verdict.meaning());
        for (status, heading) in [
            (Status::Fail, "failed:"),
            (Status::NotPublishable, "short of a publication gate:"),
            (
                Status::NotChecked,
                "rests on the signer here (not checked; the evidence says what would check it):",
            ),
            (Status::Attested, "attested (the signer's word; no one can recompute it):"),
        ] {
            let group = self.grouped(status);
            if group.is_empty() {
                continue;
            }
            let _ = writeln!(out, "{heading}");
            for (check, scopes) in group {
                let scope = match (scopes.as_slice(), status) {
                    ([one], _) => terminal_safe(one).into_owned(),
                    (many, Status::Attested) => format!("{} scopes, the first", many.len()),
                    (many, _) => format!("{} scopes", many.len()),
                };
                let _ = writeln!(
                    out,
                    "  {:<15} {scope} {}: {}",
                    status.label(),
                    terminal_safe(&check.name),
                    terminal_safe(&check.evidence)
                );
            }
        }
        out
    }

    /// The checks of `status`: failures one by one; attestations merged by name (each run attests its own
    /// values: the first is shown); the rest merged by (name, evidence); each with its scopes.
    fn grouped(&self, status: Status) -> Vec<(&Check, Vec<&str>)> {
        let mut groups: Vec<(&Check, Vec<&str>)> = Vec::new();
        for check in self.checks.iter().filter(|c| c.status == status) {
            let same = groups.iter_mut().find(|(first, _)| match status {
                Status::Fail => false,
                Status::Attested => first.name == check.name,
                _ => first.name == check.name && first.evidence == check.evidence,
            });
            match same {
                Some((_, scopes)) => scopes.push(&check.scope),
                None => groups.push((check, vec![&check.scope])),
            }
        }
        groups
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
        report.record("\u{1b}]0;x\u{7}", "n", Err("line\nbreak".into()));
        let summary = report.summary();
        assert!(!summary.contains('\u{1b}') && !summary.contains('\u{7}'), "{summary}");
        let failure_lines: Vec<&str> = summary.lines().filter(|l| l.contains("FAIL")).collect();
        assert_eq!(failure_lines.len(), 1, "an evidence newline cannot start a line of its own: {summary}");
        assert!(failure_lines[0].contains("line\\u{a}break"), "{summary}");
    }

    #[test]
    fn the_verdict_separates_recomputed_from_what_rests_on_the_signer() {
        let mut report = Report::default();
        report.record("a", "metrics", Ok("equal".into()));
        report.attest("a", "host.identity", Ok("a host".into()));
        assert_eq!(report.verdict(), Verdict::Verified, "attested context does not lower the verdict");
        report.not_checked("a", "ranking.lexical", "pass --archive");
        assert_eq!(report.verdict(), Verdict::Publishable);
        report.push("a", "git.clean", Status::NotPublishable, Basis::Attested, "dirty");
        assert_eq!(report.verdict(), Verdict::NotPublishable);
        report.attest("a", "attempts", Err("contradicts the rows".into()));
        assert_eq!(report.verdict(), Verdict::Failed);
        assert!(!report.passed());
        let summary = report.summary();
        assert!(summary.starts_with("verdict: failed"), "{summary}");
        for word in ["ATTESTED", "NOT CHECKED", "NOT PUBLISHABLE", "FAIL"] {
            assert!(summary.contains(word), "{word} missing from {summary}");
        }
        assert!(!summary.contains("metrics"), "a recomputed pass is counted, not listed: {summary}");
    }

    #[test]
    fn the_same_finding_in_many_scopes_is_one_line_but_failures_are_not_merged() {
        let mut report = Report::default();
        for scope in ["a", "b", "c"] {
            report.attest(scope, "git.clean", Ok("clean at x".into()));
            report.record(scope, "metrics", Err("differs".into()));
        }
        let summary = report.summary();
        assert_eq!(summary.lines().filter(|l| l.contains("git.clean")).count(), 1, "{summary}");
        assert!(summary.contains("3 scopes, the first git.clean"), "{summary}");
        assert_eq!(summary.lines().filter(|l| l.contains("metrics")).count(), 3, "{summary}");
    }

    #[test]
    fn verdicts_read_back_as_written() {
        for verdict in [Verdict::Failed, Verdict::NotPublishable, Verdict::Publishable, Verdict::Verified] {
            assert_eq!(Verdict::parse(verdict.as_str()), Some(verdict));
        }
        assert_eq!(Verdict::parse("pass"), None);
    }
}
