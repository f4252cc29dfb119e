//! Checks, what each rests on, and the verdict: what every command of this crate returns and
//! `verification.json` holds.
//!
//! A check says two things. Its [`Basis`]: was it *recomputed* by this verifier from the bundle's bytes and
//! public inputs (the SciFact archive, the model), is it *attested* (the signer's own statement, which no one
//! can recompute: self-reported times, git state, host, latency), was it recomputed on a *sample* only (some
//! document vectors re-embedded, with the chance a forgery slips through stated: [`EmbeddingExtent`]), or was
//! it *not checked* here (an input that would let it be recomputed was not given)? And its [`Status`]: how it
//! came out. `pass` is only ever said of something recomputed whole; a consistent attestation is `attested`,
//! never `pass`, and a sample that found nothing wrong is `sampled`, never `pass`.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The verification report schema id. Version 2 adds each check's basis and the `verified` verdict; version 3
/// the `sampled` status, basis and verdict, and `embedding`: how many vectors were re-embedded, and the bound.
pub const REPORT_SCHEMA: &str = "scifact-audit-verification-v3";

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Recomputed and equal.
    Pass,
    /// Recomputed on a sample, and equal there: the report's [`EmbeddingExtent`] says what was left out and
    /// the chance that a forgery of a given size passes.
    Sampled,
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
            Status::Sampled => "SAMPLED",
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
    /// Recomputed for a sample drawn from randomness the signer cannot predict; the rest rests on the signer.
    Sampled,
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
    /// Every number was recomputed from the evidence's vectors, but only a sample of the document vectors was
    /// re-embedded: the summary gives the chance that a forgery passes.
    Sampled,
    /// Every number a reader sees (rankings, scores, metrics, intervals, p-values, the selection, the report)
    /// was recomputed, and every vector they come from re-embedded; what remains is attested and labelled so.
    Verified,
}

impl Verdict {
    /// The verdict as `verification.json`, the summary and the in-toto Test Result write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Failed => "failed",
            Verdict::NotPublishable => "not publishable",
            Verdict::Publishable => "publishable",
            Verdict::Sampled => "sampled",
            Verdict::Verified => "verified",
        }
    }

    /// Reads a verdict as [`Verdict::as_str`] writes it (and as version 1 reports did).
    pub fn parse(text: &str) -> Option<Verdict> {
        [Verdict::Failed, Verdict::NotPublishable, Verdict::Publishable, Verdict::Sampled, Verdict::Verified]
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
            Verdict::Sampled => {
                "every ranking, score, metric, interval, p-value, the selection and the report were recomputed from \
                 the evidence's vectors, but only some of those vectors were re-embedded: the embeddings line says \
                 how likely a forgery is to pass; without --embedding-sample every vector is re-embedded"
            }
            Verdict::Verified => {
                "every ranking, score, metric, interval, p-value, the selection and the report were recomputed, and \
                 every vector re-embedded; what is attested is the signer's word and is labelled so"
            }
        }
    }
}

/// An ordered list of checks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// How many vectors the embedding check re-embedded (`None` when it did not run).
    #[serde(skip)]
    pub embedding: Option<EmbeddingExtent>,
    /// What the command behind this report recomputed, when it is not a bundle's whole verification (a
    /// comparison, a reproduction): the summary says this, not what a bundle's verdict means.
    #[serde(skip)]
    pub scope: Option<&'static str>,
}

/// How many of the evidence's vectors were re-embedded and compared bit for bit, and, when only a sample of
/// the documents was, the chance that a forgery passes: `verification.json`'s `embedding`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingExtent {
    /// Document vectors re-embedded, of how many.
    pub documents: Counted,
    /// Query vectors re-embedded, of how many (always all of them).
    pub queries: Counted,
    /// The seed the documents were drawn with (`None` when every one was re-embedded).
    pub seed: Option<u64>,
    /// For a sample: the probability that a check of this size passes a bundle with so many forged document
    /// vectors (exact hypergeometric). Empty when every vector was re-embedded.
    pub bound: Vec<PassChance>,
}

/// `re_embedded` of `of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// How many were re-embedded.
    pub re_embedded: u64,
    /// How many there are.
    pub of: u64,
}

/// The chance that a sample misses every forged document vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassChance {
    /// How many document vectors are forged.
    pub forged: u64,
    /// That many as a share of all documents, when the bound is stated as a share (1 %).
    pub forged_share: Option<f64>,
    /// The probability that the sample draws none of them.
    pub passes_with: f64,
}

impl EmbeddingExtent {
    /// Every query and `sampled` of `documents` documents, drawn with `seed`: the bound for 10 forged
    /// documents and for 1 % of them (at least one), or none when every document was re-embedded.
    pub fn new(sampled: u64, documents: u64, queries: u64, seed: u64) -> EmbeddingExtent {
        let whole = sampled >= documents;
        let bound = if whole {
            Vec::new()
        } else {
            let share = documents.div_ceil(100).max(1);
            vec![
                PassChance {
                    forged: 10.min(documents),
                    forged_share: None,
                    passes_with: passes_with(documents, sampled, 10.min(documents)),
                },
                PassChance {
                    forged: share,
                    forged_share: Some(0.01),
                    passes_with: passes_with(documents, sampled, share),
                },
            ]
        };
        EmbeddingExtent {
            documents: Counted { re_embedded: sampled.min(documents), of: documents },
            queries: Counted { re_embedded: queries, of: queries },
            seed: (!whole).then_some(seed),
            bound,
        }
    }

    /// Whether some document vector was left out.
    pub fn sampled(&self) -> bool {
        self.documents.re_embedded < self.documents.of || self.queries.re_embedded < self.queries.of
    }

    /// The extent in one sentence, for the summary, the report page and the Test Result.
    pub fn sentence(&self) -> String {
        let (documents, queries) = (self.documents, self.queries);
        if !self.sampled() {
            return format!(
                "every vector re-embedded and equal to the bit: all {} document and {} query vectors",
                thousands(documents.of),
                thousands(queries.of)
            );
        }
        let mut text = format!(
            "every number recomputed from the evidence's vectors; {} of {} document vectors re-embedded (and all {} \
             query vectors)",
            thousands(documents.re_embedded),
            thousands(documents.of),
            thousands(queries.of)
        );
        for (index, chance) in self.bound.iter().enumerate() {
            let forged = match chance.forged_share {
                Some(share) => format!("{}% of them ({}) forged", share * 100.0, thousands(chance.forged)),
                None => format!("{} forged document vectors", thousands(chance.forged)),
            };
            if index == 0 {
                let _ = write!(
                    text,
                    ": a bundle with {forged} passes this with probability {:.2}",
                    chance.passes_with
                );
            } else {
                let _ = write!(text, ", with {forged} {:.2}", chance.passes_with);
            }
        }
        if let Some(seed) = self.seed {
            let _ = write!(text, " (seed {seed})");
        }
        text
    }
}

/// The probability that `sample` of `population` documents drawn without replacement miss all `forged` of
/// them: C(population - forged, sample) / C(population, sample), as a product of ratios.
pub fn passes_with(population: u64, sample: u64, forged: u64) -> f64 {
    if forged == 0 {
        return 1.0;
    }
    if sample + forged > population {
        return 0.0;
    }
    (0..sample).map(|i| (population - forged - i) as f64 / (population - i) as f64).product()
}

/// `n` with a comma between thousands.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
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

    /// Records a recomputation over a sample: `Sampled` with `evidence` when `result` is `Ok`, else `Fail`.
    pub fn sampled(&mut self, scope: &str, name: &str, result: Result<String, String>) {
        match result {
            Ok(evidence) => self.push(scope, name, Status::Sampled, Basis::Sampled, evidence),
            Err(evidence) => self.push(scope, name, Status::Fail, Basis::Sampled, evidence),
        }
    }

    /// Records a check that could not be made here, and why.
    pub fn not_checked(&mut self, scope: &str, name: &str, reason: impl Into<String>) {
        self.push(scope, name, Status::NotChecked, Basis::NotChecked, reason);
    }

    /// Appends another report's checks and notes (and its embedding extent, when it has one).
    pub fn extend(&mut self, other: Report) {
        self.checks.extend(other.checks);
        self.notes.extend(other.notes);
        if other.embedding.is_some() {
            self.embedding = other.embedding;
        }
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
    /// was not checked, `sampled` if any was recomputed on a sample only, else `verified`.
    pub fn verdict(&self) -> Verdict {
        let any = |status| self.checks.iter().any(|c| c.status == status);
        if any(Status::Fail) {
            Verdict::Failed
        } else if any(Status::NotPublishable) {
            Verdict::NotPublishable
        } else if any(Status::NotChecked) {
            Verdict::Publishable
        } else if any(Status::Sampled) {
            Verdict::Sampled
        } else {
            Verdict::Verified
        }
    }

    /// How many checks have each status, in [`Status`] order.
    pub fn counts(&self) -> [(Status, usize); 6] {
        [
            Status::Pass,
            Status::Sampled,
            Status::Attested,
            Status::NotChecked,
            Status::NotPublishable,
            Status::Fail,
        ]
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
            "verdict: {} ({} checks: {} recomputed and equal, {} sampled, {} attested, {} not checked, {} not publishable, {} failed)",
            verdict.as_str(),
            self.checks.len(),
            count(Status::Pass),
            count(Status::Sampled),
            count(Status::Attested),
            count(Status::NotChecked),
            count(Status::NotPublishable),
            count(Status::Fail),
        );
        if let Some(extent) = &self.embedding {
            let _ = writeln!(out, "  embeddings: {}", extent.sentence());
        }
        match (self.scope, verdict) {
            (Some(scope), Verdict::Verified | Verdict::Sampled | Verdict::Publishable) => {
                let _ = writeln!(out, "  {scope}");
            }
            _ => {
                let _ = writeln!(out, "  {}", verdict.meaning());
            }
        }
        for (status, heading) in [
            (Status::Fail, "failed:"),
            (
                Status::Sampled,
                "recomputed on a sample (the embeddings line gives the chance a forgery passes):",
            ),
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
                // One scope: `LABEL scope name: evidence`; the same finding in several: named once, with how many.
                let (scope, name) = (terminal_safe(scopes[0]), terminal_safe(&check.name));
                let at = match (scopes.len(), status) {
                    (1, _) => format!("{scope} {name}"),
                    (n, Status::Attested) => {
                        format!("{name} (in each of {n} scopes; as the first records it)")
                    }
                    (n, _) => format!("{name} (in each of {n} scopes)"),
                };
                let _ = writeln!(out, "  {:<15} {at}: {}", status.label(), terminal_safe(&check.evidence));
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
        assert!(summary.contains("git.clean (in each of 3 scopes; as the first records it)"), "{summary}");
        assert_eq!(summary.lines().filter(|l| l.contains("metrics")).count(), 3, "{summary}");
    }

    #[test]
    fn a_sample_is_its_own_verdict_below_verified_and_above_what_rests_on_the_signer() {
        let mut report = Report::default();
        report.record("a", "metrics", Ok("equal".into()));
        report.sampled("global", "embedding.values", Ok("64 of 5,183 documents".into()));
        report.embedding = Some(EmbeddingExtent::new(64, 5183, 300, 11));
        assert_eq!(report.verdict(), Verdict::Sampled);
        assert!(report.passed(), "a sample that found nothing is not a failure");
        let summary = report.summary();
        assert!(
            summary.starts_with("verdict: sampled (2 checks: 1 recomputed and equal, 1 sampled"),
            "{summary}"
        );
        assert!(summary.contains("SAMPLED"), "{summary}");
        assert!(
            summary.contains(
                "embeddings: every number recomputed from the evidence's vectors; 64 of 5,183 document vectors \
                 re-embedded (and all 300 query vectors): a bundle with 10 forged document vectors passes this \
                 with probability 0.88, with 1% of them (52) forged 0.52 (seed 11)"
            ),
            "{summary}"
        );
        report.not_checked("a", "ranking.lexical", "pass --archive");
        assert_eq!(report.verdict(), Verdict::Publishable, "what rests on the signer outranks a sample");
        report.sampled("global", "embedding.values", Err("document \"7\" differs".into()));
        assert_eq!(report.verdict(), Verdict::Failed);
        assert!(Verdict::Sampled < Verdict::Verified && Verdict::Publishable < Verdict::Sampled);
    }

    #[test]
    fn the_bound_is_the_exact_hypergeometric_and_vanishes_for_a_whole_check() {
        // C(N - K, n) / C(N, n), checked against the closed forms of small cases.
        assert_eq!(passes_with(10, 1, 1), 0.9);
        assert!((passes_with(10, 2, 1) - 0.8).abs() < 1e-15);
        assert!((passes_with(10, 3, 2) - 7.0 / 15.0).abs() < 1e-15, "C(8,3)/C(10,3) = 56/120");
        assert_eq!(passes_with(10, 9, 2), 0.0, "a sample too large to miss two");
        assert_eq!(passes_with(10, 4, 0), 1.0);
        let whole = EmbeddingExtent::new(5183, 5183, 300, 11);
        assert!(!whole.sampled() && whole.bound.is_empty() && whole.seed.is_none());
        assert_eq!(
            whole.sentence(),
            "every vector re-embedded and equal to the bit: all 5,183 document and 300 query vectors"
        );
        let sample = EmbeddingExtent::new(64, 5183, 300, 11);
        assert_eq!((sample.bound[0].forged, sample.bound[1].forged), (10, 52));
        assert!((sample.bound[0].passes_with - 0.883).abs() < 0.001, "{:?}", sample.bound);
        assert_eq!(thousands(8_841_823), "8,841,823");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn verdicts_read_back_as_written() {
        for verdict in [
            Verdict::Failed,
            Verdict::NotPublishable,
            Verdict::Publishable,
            Verdict::Sampled,
            Verdict::Verified,
        ] {
            assert_eq!(Verdict::parse(verdict.as_str()), Some(verdict));
        }
        assert_eq!(Verdict::parse("pass"), None);
    }
}
