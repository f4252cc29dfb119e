//! `scifact-audit embed`: JSON strings in, `{"vector", "tokens"}` lines out, in input order.

use std::io::{BufRead, BufWriter, IsTerminal, Write};

use anyhow::{Context, bail};
use embedding::{Embedder, MiniLm, Ollama, Role, WeightPin};

use crate::cli::{EmbedArgs, EmbedderKind, RoleArg};

/// Lines read, embedded and written per step, so output streams and memory stays flat.
const CHUNK: usize = 256;

pub(crate) fn run(args: &EmbedArgs) -> anyhow::Result<std::process::ExitCode> {
    let embedder = open_embedder(args)?;
    let role = args.role.map(|role| match role {
        RoleArg::Document => Role::Document,
        RoleArg::Query => Role::Query,
    });
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let progress = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} embedded {pos} texts ({per_sec}) {elapsed}")
                .context("progress style")?,
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut texts: Vec<String> = Vec::with_capacity(CHUNK);
    let flush = |texts: &mut Vec<String>, out: &mut BufWriter<_>| -> anyhow::Result<()> {
        let prompts: Vec<String> =
            texts.iter().map(|t| role.map_or_else(|| t.clone(), |r| r.prompt(t))).collect();
        let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
        for embedding in embedder.embed(&refs)? {
            let line = serde_json::json!({ "vector": embedding.vector, "tokens": embedding.tokens });
            writeln!(out, "{line}").context("writing stdout")?;
        }
        progress.inc(texts.len() as u64);
        texts.clear();
        Ok(())
    };
    for (index, line) in stdin.lines().enumerate() {
        let line = line.with_context(|| format!("reading stdin line {}", index + 1))?;
        let text: String = serde_json::from_str(&line).with_context(|| {
            format!("stdin line {} is not a JSON string (expected one JSON string per line)", index + 1)
        })?;
        texts.push(text);
        if texts.len() == CHUNK {
            flush(&mut texts, &mut out)?;
        }
    }
    if !texts.is_empty() {
        flush(&mut texts, &mut out)?;
    }
    out.flush().context("writing stdout")?;
    progress.finish_and_clear();
    Ok(std::process::ExitCode::SUCCESS)
}

fn open_embedder(args: &EmbedArgs) -> anyhow::Result<Box<dyn Embedder>> {
    match args.embedder {
        EmbedderKind::Ollama => {
            Ok(Box::new(Ollama::new(None, &args.model, embedding_dims_for_ollama(&args.model)?)?))
        }
        EmbedderKind::Minilm => {
            let dir = match embedding::find_model_dir(args.model_dir.as_deref()) {
                Some(dir) => dir,
                None => {
                    let Some(cache) = embedding::model_cache_dir() else {
                        bail!("no --model-dir, no SCIFACT_MODEL_DIR and no HOME to cache a download in");
                    };
                    embedding::download_pinned(
                        embedding::ALL_MINILM_L6_V2_BASE_URL,
                        &embedding::all_minilm_l6_v2_files(),
                        &cache,
                    )
                    .context("fetching all-MiniLM-L6-v2 (set SCIFACT_MODEL_DIR to use a local copy)")?;
                    cache
                }
            };
            let (name, pin) = match &args.weights_sha256 {
                Some(hex) => (format!("bert-sha256-{hex}"), WeightPin::Sha256(hex.clone())),
                None => (embedding::ALL_MINILM_L6_V2.to_owned(), WeightPin::AllMiniLmL6V2),
            };
            let mut model = MiniLm::load(&dir, &name, pin)
                .with_context(|| format!("loading the model from {}", dir.display()))?;
            model.set_batch_size(args.batch_size);
            Ok(Box::new(model))
        }
    }
}

/// The dimension to expect from an Ollama model; only the contract's model is known.
fn embedding_dims_for_ollama(model: &str) -> anyhow::Result<usize> {
    if model.starts_with("all-minilm") {
        Ok(384)
    } else {
        bail!("unknown dimension for Ollama model {model:?}: only all-minilm is supported")
    }
}
