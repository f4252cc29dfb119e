//! `scifact-audit build`: flags to `scifact_eval::build_fixture`, and a summary a person can read.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use scifact_eval::{DigestPolicy, SCIFACT_PUBLISHED_MD5, SCIFACT_URL, build_fixture, fetch_archive};

use crate::cli::BuildArgs;
use crate::model::open_embedder;
use crate::progress::StageProgress;

/// The archive to build from: `--archive`, else `$SCIFACT_ARCHIVE`, else a download into `work_dir` pinned to
/// BEIR's published md5 (or an explicitly accepted sha256).
pub(crate) fn acquire_archive(
    archive: Option<&Path>,
    work_dir: &Path,
    accept_archive_digest: Option<&str>,
    progress: &StageProgress,
) -> anyhow::Result<(PathBuf, DigestPolicy)> {
    let local = archive
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("SCIFACT_ARCHIVE").filter(|v| !v.is_empty()).map(PathBuf::from));
    Ok(match local {
        Some(path) => (path, DigestPolicy::LocalRecorded),
        None => {
            let dest = work_dir.join("scifact.zip");
            let policy =
                fetch_archive(SCIFACT_URL, &dest, SCIFACT_PUBLISHED_MD5, accept_archive_digest, progress)
                    .with_context(|| {
                        format!(
                            "no --archive or SCIFACT_ARCHIVE given, and BEIR's {SCIFACT_URL} could not be fetched or \
                             admitted; pass --archive ZIP (or set SCIFACT_ARCHIVE) with a copy of scifact.zip (BEIR's \
                             file has md5 {SCIFACT_PUBLISHED_MD5}; any other copy is evaluated, its digests recorded)"
                        )
                    })?;
            (dest, policy)
        }
    })
}

pub(crate) fn run(args: &BuildArgs) -> anyhow::Result<std::process::ExitCode> {
    let (Some(out), None) = (&args.out, &args.shard) else {
        return run_shard(args);
    };
    let _guard = crate::guard::writing(
        "build",
        &[&args.work_dir],
        &[],
        &args.lock,
        crate::guard::OnStop::AtDurablePoint,
    )?;
    let progress = StageProgress::new();
    let corpus = crate::corpus::Corpus::chosen(args.profile, &args.dataset)?;
    let (embedder, options) = prepare(args, &corpus, out.clone(), &progress)?;
    let summary = build_fixture(&options, embedder.as_ref(), &progress)
        .with_context(|| format!("building {} from {}", out.display(), options.archive.display()))?;
    let fixture = out;
    let mut out = std::io::stdout().lock();
    writeln!(out, "fixture      {}", fixture.display())?;
    writeln!(out, "sha256       {}", summary.fixture_sha256)?;
    writeln!(
        out,
        "corpus       {} documents, {} test queries, {} qrels",
        summary.counts.documents, summary.counts.queries, summary.counts.qrels
    )?;
    writeln!(out, "cut at 700   {} documents, {} queries", summary.documents_cut, summary.queries_cut)?;
    writeln!(out, "embeddings   {} from cache, {} new", summary.cache_hits, summary.embedded)?;
    if summary.dropped_cache_tail_bytes > 0 {
        writeln!(
            out,
            "recovered    dropped a torn cache tail of {} bytes",
            summary.dropped_cache_tail_bytes
        )?;
    }
    writeln!(out, "time         {:.1} s", summary.elapsed.as_secs_f64())?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// What a build and a build shard both start from: the archive (fetched if need be), the embedder, and the
/// options its flags give (`out`, the fixture to write; a shard writes none).
fn prepare(
    args: &BuildArgs,
    corpus: &crate::corpus::Corpus,
    out: PathBuf,
    progress: &StageProgress,
) -> anyhow::Result<(Box<dyn embedding::Embedder>, scifact_eval::BuildOptions)> {
    let (archive, digest_policy) = corpus.archive(
        args.archive.as_deref(),
        &args.work_dir,
        args.accept_archive_digest.as_deref(),
        progress,
    )?;
    let (embedder, _) = open_embedder(&corpus.model_args(&args.model_args)?)?;
    let options = corpus.build_options(
        archive,
        digest_policy,
        args.work_dir.clone(),
        out,
        args.text_policy.kind(embedder.as_ref()),
        args.fixture_format.format(),
    );
    Ok((embedder, options))
}

/// `build --shard`: embeds one slice into its own cache, locking only that shard's directory, so that every
/// shard of an array can run at once on one work directory (on shared storage).
fn run_shard(args: &BuildArgs) -> anyhow::Result<std::process::ExitCode> {
    let text = args.shard.as_deref().unwrap_or_default();
    let shard = scifact_eval::Shard::parse(text, |name| std::env::var(name).ok())?;
    let corpus = crate::corpus::Corpus::chosen(args.profile, &args.dataset)?;
    let profile = corpus.profile();
    let dir = shard.dir(&args.work_dir, &profile.name, &profile.split);
    let _guard = crate::guard::writing(
        "build --shard",
        &[&dir],
        &[],
        &args.lock,
        crate::guard::OnStop::AtDurablePoint,
    )?;
    let progress = StageProgress::new();
    let (embedder, options) = prepare(args, &corpus, PathBuf::new(), &progress)?;
    let summary = scifact_eval::build_shard(&options, shard, embedder.as_ref(), &progress)
        .with_context(|| format!("embedding shard {shard} of {}", options.archive.display()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "shard        {} of {} (from 0)", shard.index, shard.count)?;
    writeln!(
        out,
        "slice        documents {}..{} and queries {}..{} of {} and {}",
        summary.documents.start,
        summary.documents.end,
        summary.queries.start,
        summary.queries.end,
        summary.counts.documents,
        summary.counts.queries
    )?;
    writeln!(out, "embeddings   {} from cache, {} new", summary.cache_hits, summary.embedded)?;
    if summary.dropped_cache_tail_bytes > 0 {
        writeln!(
            out,
            "recovered    dropped a torn cache tail of {} bytes",
            summary.dropped_cache_tail_bytes
        )?;
    }
    writeln!(out, "cache        {}", summary.cache.display())?;
    writeln!(out, "time         {:.1} s", summary.elapsed.as_secs_f64())?;
    writeln!(
        out,
        "next         when every shard is done: the same build without --shard, with --out, writes the fixture"
    )?;
    Ok(std::process::ExitCode::SUCCESS)
}
