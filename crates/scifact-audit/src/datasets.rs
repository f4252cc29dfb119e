//! `datasets`: the BEIR registry as a table a person reads, or as the registry's own JSON.

use std::io::Write;
use std::process::ExitCode;

use scifact_eval::datasets::{BEIR_DATASETS, dataset_registry};

use crate::cli::DatasetsArgs;

pub(crate) fn run(args: &DatasetsArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match write(args, &mut out) {
        // A reader that stopped early (`| head`) is not an error.
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        outcome => outcome,
    }
}

fn write(args: &DatasetsArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    if args.json {
        out.write_all(BEIR_DATASETS.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let registry = dataset_registry().map_err(|reason| anyhow::anyhow!(reason))?;
    writeln!(out, "BEIR datasets (configs/beir-datasets.json; {} rows)", registry.datasets.len())?;
    writeln!(
        out,
        "{:<26} {:<5} {:>11} {:>7} {:>6}  {:<42} md5 (BEIR)",
        "name", "split", "documents", "queries", "calib.", "qrels lines per grade"
    )?;
    for dataset in &registry.datasets {
        let name =
            if dataset.public { dataset.name.clone() } else { format!("{} (not public)", dataset.name) };
        let md5 = dataset.md5.as_deref().unwrap_or("none");
        row(out, &name, &dataset.split, (dataset.documents, dataset.queries), &dataset.grades, md5)?;
        for forum in &dataset.forums {
            let name = format!("  {}/{}", dataset.name, forum.name);
            row(out, &name, &dataset.split, (forum.documents, forum.queries), &forum.grades, "(in the zip)")?;
        }
    }
    writeln!(out, "\nquirks BEIR's rules handle:")?;
    for dataset in registry.datasets.iter().filter(|d| !d.quirks.is_empty()) {
        writeln!(out, "  {:<18} {}", dataset.name, dataset.quirks.join("; "))?;
    }
    writeln!(out, "\nrules:")?;
    for (rule, statement) in &registry.rules {
        writeln!(out, "  {rule:<20} {statement}")?;
    }
    let evaluated: Vec<&str> = registry
        .datasets
        .iter()
        .filter(|d| crate::corpus::Corpus::evaluable(&d.name))
        .map(|d| d.name.as_str())
        .collect();
    writeln!(
        out,
        "\ncalib.: the queries calibration takes, min(100, half); the rest are held out.\n\
         `eval --dataset NAME` (BEIR's download, checked against its md5, or --archive ZIP) takes {} (scifact is \
         the default; a list a,b,c is a suite, and cqadupstack is its twelve forums' suite), and refuses an archive over the reader's caps (64 MiB a member, 256 MiB in all), as the \
         corpora of a million documents and more are; the others are listed for their identity and shape. \
         `eval --dataset-archive ZIP [--qrels-split dev]` takes any zip in BEIR's layout, as no registered dataset.",
        evaluated.join(", ")
    )?;
    Ok(ExitCode::SUCCESS)
}

/// One line of the table: a dataset or a forum, its split, (documents, queries), qrels lines per grade, md5.
fn row(
    out: &mut impl Write,
    name: &str,
    split: &str,
    (documents, queries): (usize, usize),
    grades: &std::collections::BTreeMap<String, usize>,
    md5: &str,
) -> std::io::Result<()> {
    let grades: Vec<String> =
        grades.iter().map(|(grade, lines)| format!("{grade}: {}", thousands(*lines))).collect();
    writeln!(
        out,
        "{name:<26} {:<5} {:>11} {:>7} {:>6}  {:<42} {md5}",
        split,
        thousands(documents),
        thousands(queries),
        scifact_eval::calibration_count(queries),
        if grades.is_empty() { "not counted".to_owned() } else { grades.join(", ") },
    )
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
