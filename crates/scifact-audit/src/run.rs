//! `scifact-audit run`: flags to `scifact_eval::run`, and a metric table printed beside its claim boundary.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use scifact_eval::{ALL_MODES, RunOptions, Split, claim_boundary};
use semantic_memory::{SearchConfig, SearchMode};

use crate::cli::{BuildSparseArgs, ModeArg, RunArgs, SplitArg};
use crate::progress::StageProgress;

/// The source revision this executable was built from (see build.rs).
pub(crate) const BUILD_REVISION: &str = env!("SCIFACT_AUDIT_BUILD_REVISION");

pub(crate) fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let _guard = crate::guard::writing(
        "run",
        &[&args.store_dir, &args.output_dir],
        &[],
        &args.lock,
        crate::guard::OnStop::AtDurablePoint,
    )?;
    if args.mode == ModeArg::SparseOnly && args.sparse_fixture.is_none() {
        anyhow::bail!("--mode sparse_only needs --sparse-fixture (written by `scifact-audit build-sparse`)");
    }
    let modes = match args.mode {
        ModeArg::FtsOnly => vec![SearchMode::FtsOnly],
        ModeArg::VectorOnly => vec![SearchMode::VectorOnly],
        ModeArg::Hybrid => vec![SearchMode::Hybrid],
        ModeArg::SparseOnly => vec![SearchMode::SparseOnly],
        ModeArg::All => ALL_MODES.to_vec(),
    };
    let split = match args.split {
        SplitArg::Calibration => Split::Calibration,
        SplitArg::Heldout => Split::Heldout,
        SplitArg::All => Split::All,
    };
    let options = RunOptions {
        fixture: args.corpus.clone(),
        store_dir: args.store_dir.clone(),
        output_dir: args.output_dir.clone(),
        split,
        modes,
        config: SearchConfig { sparse_weight: args.sparse_weight, ..args.lexical.lexical().baseline() },
        build_revision: BUILD_REVISION.into(),
        generated_by: format!("scifact-audit {}", env!("CARGO_PKG_VERSION")),
        sparse_fixture: args.sparse_fixture.clone(),
    };
    let report = scifact_eval::run(&options, &StageProgress::new())
        .with_context(|| format!("running {split} from {}", args.corpus.display()))?;

    let mut out = std::io::stdout().lock();
    if report.store_inserted > 0 {
        writeln!(
            out,
            "store        {} documents inserted ({} found already stored)",
            report.store_inserted, report.store_resumed_from
        )?;
    }
    writeln!(
        out,
        "split        {split} ({} queries)",
        report.runs.first().map_or(0, |r| r.aggregate.queries.selected)
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "mode", "nDCG@10", "R@1", "R@5", "R@10", "MRR@10", "MAP@10", "p50 ms", "p95 ms", "failures"
    )?;
    for summary in &report.runs {
        let m = &summary.aggregate.metrics;
        writeln!(
            out,
            "{:<12} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>9.3} {:>9.3} {:>8}",
            summary.mode.as_str(),
            m.quality.ndcg_10,
            m.quality.recall_1,
            m.quality.recall_5,
            m.quality.recall_10,
            m.quality.mrr_10,
            m.quality.map_10,
            m.latency_ms.p50,
            m.latency_ms.p95,
            summary.aggregate.queries.failures
        )?;
    }
    writeln!(out)?;
    for summary in &report.runs {
        writeln!(out, "wrote        {}", summary.aggregate_path.display())?;
    }
    let boundary =
        report.runs.first().map_or_else(claim_boundary, |run| run.aggregate.claim_boundary.clone());
    writeln!(out)?;
    writeln!(out, "Not yet validated: run `scifact-audit validate` before quoting any number.")?;
    writeln!(out, "These numbers do not establish: {}.", boundary.does_not_establish.join("; "))?;
    Ok(ExitCode::SUCCESS)
}

/// `scifact-audit build-sparse`: a fixture's texts through a learned sparse checkpoint, into a sparse fixture.
pub(crate) fn build_sparse(args: &BuildSparseArgs) -> anyhow::Result<ExitCode> {
    let parent = args.out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let _guard =
        crate::guard::writing("build-sparse", &[parent], &[], &args.lock, crate::guard::OnStop::AtOnce)?;
    let encoder = embedding::SparseEncoder::load(&args.sparse_model_dir)
        .with_context(|| format!("loading the sparse checkpoint {}", args.sparse_model_dir.display()))?;
    let sparse = scifact_eval::build_sparse_fixture(&args.corpus, &encoder, &args.out, &StageProgress::new())
        .with_context(|| format!("encoding {} into {}", args.corpus.display(), args.out.display()))?;
    let non_zero = |entries: &[scifact_eval::SparseEntry]| {
        entries.iter().map(|e| e.indices.len()).sum::<usize>() as f64 / entries.len().max(1) as f64
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "model        {} ({:?})", sparse.model.model, sparse.model.layout)?;
    writeln!(
        out,
        "documents    {} ({:.1} non-zero weights each on average)",
        sparse.documents.len(),
        non_zero(&sparse.documents)
    )?;
    writeln!(
        out,
        "queries      {} ({:.1} non-zero weights each)",
        sparse.queries.len(),
        non_zero(&sparse.queries)
    )?;
    writeln!(out, "written      {}", args.out.display())?;
    Ok(ExitCode::SUCCESS)
}
