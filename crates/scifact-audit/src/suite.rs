//! `eval` of several evaluations — `--dataset a,b,c`, a dataset of forums (CQADupStack), an archive of forums —
//! as a suite: each evaluation runs as `eval` runs one, in `<work-dir>/<name>/`, and `<work-dir>/suite/` holds
//! a copy of every bundle and `suite.json`, the table whose every cell names the bundle it comes from by the
//! digest of its signed manifest, signed with the same key. `verify-suite` checks it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use scifact_eval::suite::{
    COLUMNS, SUITE_FILE, SUITE_SIGNATURE_FILE, Suite, SuiteRow, bundle_row, forums_row,
};

use crate::cli::EvalArgs;
use crate::corpus::{Corpus, Planned};
use crate::eval::{Signer, Target, run_one};
use crate::progress::StageProgress;

/// The suite directory under the work directory.
pub(crate) const SUITE_DIR: &str = "suite";

pub(crate) fn run(args: &EvalArgs, plan: &[Planned], signer: Option<&Signer>) -> anyhow::Result<ExitCode> {
    if args.archive.is_some() {
        bail!(
            "a suite reads one archive per dataset: give --archive-dir DIR (DIR/NAME.zip for each dataset, \
             cqadupstack.zip for its forums), or let each be downloaded from BEIR"
        );
    }
    let work = &args.work_dir;
    let _guard =
        crate::guard::writing("eval", &[work], &[], &args.lock, crate::guard::OnStop::AtDurablePoint)?;
    let progress = StageProgress::new();
    let mut made: Vec<(Option<String>, String, PathBuf)> = Vec::new();
    for (index, planned) in plan.iter().enumerate() {
        let name = planned.corpus.name();
        let label = name.replace('/', "-");
        progress.note(&format!("suite: {} of {}: {name}", index + 1, plan.len()));
        let archive = archive_of(args, &planned.corpus, &progress)?;
        let target =
            Target { corpus: &planned.corpus, work: &work.join(&label), archive: archive.as_deref() };
        let (code, bundle) = run_one(args, &target, signer)?;
        let Some(bundle) = bundle else {
            writeln!(std::io::stderr(), "suite: {name} did not verify; the suite stops here")?;
            return Ok(code);
        };
        made.push((planned.group.clone(), label, bundle));
    }

    let suite_dir = work.join(SUITE_DIR);
    let mut rows: Vec<SuiteRow> = Vec::new();
    let mut forums: Vec<SuiteRow> = Vec::new();
    for (index, (group, label, bundle)) in made.iter().enumerate() {
        publish_copy(bundle, &suite_dir.join(label))?;
        let row = bundle_row(&suite_dir, label).map_err(|reason| anyhow::anyhow!(reason))?;
        match group {
            None => rows.push(row),
            Some(group) => {
                forums.push(row);
                if made.get(index + 1).is_none_or(|next| next.0.as_ref() != Some(group)) {
                    rows.push(forums_row(group, std::mem::take(&mut forums)));
                }
            }
        }
    }
    safe_fs::halt::point("suite.bundles");
    let suite = scifact_eval::suite::suite(rows);
    let mut bytes = serde_json::to_vec_pretty(&suite)?;
    bytes.push(b'\n');
    safe_fs::write_atomically(&suite_dir.join(SUITE_FILE), &bytes)?;
    if let Some(signer) = signer {
        let signature = receipt_verify::sign_document(&signer.secret, &bytes, "suite")?;
        safe_fs::write_atomically(&suite_dir.join(SUITE_SIGNATURE_FILE), signature.as_bytes())?;
    } else {
        let _ = std::fs::remove_file(suite_dir.join(SUITE_SIGNATURE_FILE));
    }
    print_table(&suite, &suite_dir, signer.is_some())?;
    Ok(ExitCode::SUCCESS)
}

/// The archive a suite's evaluation reads: `--archive-dir`'s `NAME.zip` when there; a registered dataset's
/// download otherwise, made once into `<work-dir>/archives/` (CQADupStack's forums share one); `None` for the
/// rest (SciFact's own rule, an unregistered archive's path).
fn archive_of(args: &EvalArgs, corpus: &Corpus, progress: &StageProgress) -> anyhow::Result<Option<PathBuf>> {
    let file = match corpus {
        Corpus::Scifact => "scifact".to_owned(),
        Corpus::Beir { dataset, .. } => dataset.name.clone(),
        Corpus::Tiny | Corpus::Unregistered { .. } => return Ok(None),
    };
    if let Some(dir) = &args.archive_dir {
        let path = dir.join(format!("{file}.zip"));
        if path.exists() {
            return Ok(Some(path));
        }
    }
    match corpus {
        Corpus::Beir { .. } => {
            let (path, _) = corpus.archive(
                None,
                &args.work_dir.join("archives"),
                args.accept_archive_digest.as_deref(),
                progress,
            )?;
            Ok(Some(path))
        }
        _ => Ok(None),
    }
}

/// Copies the bundle at `from` to `to` (staged, then published): kept when `to` already holds the same
/// manifest, moved aside when it holds another.
fn publish_copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    let manifest = |dir: &Path| std::fs::read(dir.join(receipt_verify::MANIFEST_FILE)).ok();
    if to.symlink_metadata().is_ok() {
        let kept = manifest(to);
        if kept.is_some() && kept == manifest(from) {
            return Ok(());
        }
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let aside = to.with_file_name(format!(
            "{}.replaced-{unix}",
            to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        ));
        std::fs::rename(to, &aside).with_context(|| format!("moving {} aside", to.display()))?;
    }
    let staging = safe_fs::staging_dir(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            bail!("{} is not a plain file: a bundle holds only files", entry.path().display());
        }
        copy_streaming(&entry.path(), &staging.path().join(entry.file_name()))?;
    }
    safe_fs::publish_dir(staging, to)?;
    Ok(())
}

/// Copies a regular file (up to the 64 GiB a bundle's vectors may take) a megabyte at a time into a new file,
/// synced before it is renamed into place: no bundle file is ever held whole.
fn copy_streaming(from: &Path, to: &Path) -> anyhow::Result<()> {
    let (mut file, _) = safe_fs::open_regular_capped(from, 64 << 30)?;
    let mut writer = safe_fs::AtomicWriter::create(to)?;
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = std::io::Read::read(&mut file, &mut buffer)
            .with_context(|| format!("reading {}", from.display()))?;
        if read == 0 {
            break;
        }
        writer.write(&buffer[..read])?;
    }
    writer.commit()?;
    Ok(())
}

/// The table, as a person reads it.
fn print_table(suite: &Suite, dir: &Path, signed: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\nsuite        {} ({})",
        dir.join(SUITE_FILE).display(),
        if signed { "signed" } else { "unsigned" }
    )?;
    write!(out, "  {:<28}", "nDCG@10")?;
    for (column, _) in COLUMNS {
        write!(out, " {column:>16}")?;
    }
    writeln!(out)?;
    let line = |out: &mut std::io::StdoutLock, name: &str, row: &SuiteRow| -> std::io::Result<()> {
        write!(out, "  {name:<28}")?;
        for (column, _) in COLUMNS {
            write!(out, " {:>16}", row.cells.get(column).map_or("-".into(), |c| format!("{:.4}", c.value)))?;
        }
        writeln!(out)
    };
    for row in &suite.rows {
        line(&mut out, &row.dataset, row)?;
        for forum in &row.forums {
            line(&mut out, &format!("  {}", forum.dataset), forum)?;
        }
    }
    write!(out, "  {:<28}", "mean")?;
    for (column, _) in COLUMNS {
        write!(out, " {:>16}", suite.mean.get(column).map_or("-".into(), |v| format!("{v:.4}")))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "every cell names its bundle by manifest digest; check them all with `scifact-audit verify-suite --suite-dir {}`",
        dir.display()
    )?;
    Ok(())
}
