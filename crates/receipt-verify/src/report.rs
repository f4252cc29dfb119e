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
            out.push_str(&format!("  {status:<15} {} {}: {}\n", check.scope, check.name, check.evidence));
        }
        out
    }
}
