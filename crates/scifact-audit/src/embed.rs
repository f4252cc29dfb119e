//! `scifact-audit embed`: JSON strings in, `{"vector", "tokens"}` lines out, in input order.

use std::io::{BufRead, BufWriter, IsTerminal, Write};

use anyhow::Context;
use embedding::Role;

use crate::cli::{EmbedArgs, RoleArg, TextPolicyArg};
use crate::model::open_embedder;

/// Lines read, embedded and written per step, so output streams and memory stays flat.
const CHUNK: usize = 256;
/// The same on a GPU, whose batches are larger.
const GPU_CHUNK: usize = 4096;

pub(crate) fn run(args: &EmbedArgs) -> anyhow::Result<std::process::ExitCode> {
    let role = args.role.map(|role| match role {
        RoleArg::Document => Role::Document,
        RoleArg::Query => Role::Query,
    });
    if args.text_policy == TextPolicyArg::Model {
        if role.is_none() {
            anyhow::bail!("--text-policy model needs --role (the prompt is the role's)");
        }
        if args.model_args.embedder != crate::cli::EmbedderKind::Minilm {
            anyhow::bail!(
                "--text-policy model needs the in-process embedder (the checkpoint declares the prompts)"
            );
        }
        if embedding::find_model_dir(args.model_args.model_dir.as_deref()).is_none() {
            anyhow::bail!("--text-policy model needs the checkpoint on disk: pass --model-dir");
        }
    }
    if args.model_args.embedder == crate::cli::EmbedderKind::Minilm
        && let Some(dir) = args.model_args.model_dir.as_deref()
    {
        let reading = || format!("reading {}", dir.display());
        if embedding::ColbertEncoder::is_colbert(dir).with_context(reading)? {
            return colbert(args, dir, role);
        }
        if embedding::SparseEncoder::is_sparse(dir).with_context(reading)? {
            return sparse(args, dir, role);
        }
    }
    let (embedder, _) = open_embedder(&args.model_args)?;
    // Under the model's policy, the role's prompt the checkpoint declares, given apart from each text.
    let policy = match role {
        Some(_) => args.text_policy.kind(embedder.as_ref()),
        None => scifact_eval::TextPolicyKind::Contract,
    };
    let model_prompt =
        role.filter(|_| policy == scifact_eval::TextPolicyKind::Model).map(|r| embedder.declared_prompt(r));
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
    let chunk = if embedder.on_gpu() { GPU_CHUNK } else { CHUNK };
    let mut texts: Vec<String> = Vec::with_capacity(chunk);
    let started = std::time::Instant::now();
    let modelled = std::cell::Cell::new(std::time::Duration::ZERO);
    let count = std::cell::Cell::new(0usize);
    let flush = |texts: &mut Vec<String>, out: &mut BufWriter<_>| -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        let embedded = match &model_prompt {
            Some(prompt) => {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                embedder.embed_prompted(prompt, &refs)?
            }
            None => {
                let prompts: Vec<String> =
                    texts.iter().map(|t| role.map_or_else(|| t.clone(), |r| r.prompt(t))).collect();
                let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
                embedder.embed(&refs)?
            }
        };
        modelled.set(modelled.get() + start.elapsed());
        count.set(count.get() + embedded.len());
        for embedding in embedded {
            // Widened to f64, as in the fixture: parsing the printed value and narrowing gives the exact f32.
            let vector: Vec<f64> = embedding.vector.iter().map(|x| f64::from(*x)).collect();
            let line = serde_json::json!({ "vector": vector, "tokens": embedding.tokens });
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
        if texts.len() == chunk {
            flush(&mut texts, &mut out)?;
        }
    }
    if !texts.is_empty() {
        flush(&mut texts, &mut out)?;
    }
    out.flush().context("writing stdout")?;
    progress.finish_and_clear();
    let (count, model_seconds) = (count.get(), modelled.get().as_secs_f64());
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "embedded {count} texts in {model_seconds:.3} s in the model (tokenising and the forward pass, the \
             model loaded: {:.0} texts/s), {:.3} s in all with reading and writing",
            count as f64 / model_seconds.max(1e-9),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `embed` of a sparse checkpoint (SPLADE): one `{"sparse": {"indices", "values"}, "tokens"}` line per text, as
/// sentence-transformers' `encode_query` / `encode_document` give it (the role's prompt from the checkpoint),
/// or each text as given without `--role`.
fn sparse(
    args: &EmbedArgs,
    dir: &std::path::Path,
    role: Option<Role>,
) -> anyhow::Result<std::process::ExitCode> {
    if args.text_policy == TextPolicyArg::Contract {
        anyhow::bail!(
            "--text-policy contract: a sparse checkpoint is read with its own prompts (encode_query and \
             encode_document), so only `auto` or `model` apply"
        );
    }
    cpu_checkpoint_only(args, ("a sparse checkpoint's MLM head runs", "a sparse one"))?;
    let mut encoder = embedding::SparseEncoder::load(dir)
        .with_context(|| format!("loading the sparse checkpoint from {}", dir.display()))?;
    encoder.set_batch_size(args.model_args.batch_size.min(64));
    #[allow(clippy::print_stderr)]
    {
        let identity = encoder.identity();
        eprintln!(
            "device: cpu ({:?} kernels); sparse encoder {} ({:?}, {} pooling, vocabulary {}{})",
            embedding::Kernels::best(),
            identity.model,
            identity.layout,
            identity.pooling,
            identity.vocab,
            identity.max_active_dims.map_or_else(String::new, |k| format!(", at most {k} active"))
        );
    }
    let started = std::time::Instant::now();
    let (count, modelled) = each_chunk(|texts, out| {
        for embedding in encoder.encode(role, texts, &|_| {})? {
            let values: Vec<f64> = embedding.vector.values.iter().map(|x| f64::from(*x)).collect();
            let line = serde_json::json!({
                "sparse": {"indices": embedding.vector.indices, "values": values},
                "tokens": embedding.tokens,
            });
            writeln!(out, "{line}").context("writing stdout")?;
        }
        Ok(())
    })?;
    report(count, modelled, started, "tokenising, the forward pass and the MLM head");
    Ok(std::process::ExitCode::SUCCESS)
}

/// `embed` of a ColBERT checkpoint: one `{"vectors": [[...], ...], "tokens"}` line per text, a vector per kept
/// token, as PyLate's `encode(is_query=...)` gives them; `--role` says which.
fn colbert(
    args: &EmbedArgs,
    dir: &std::path::Path,
    role: Option<Role>,
) -> anyhow::Result<std::process::ExitCode> {
    let Some(role) = role else {
        anyhow::bail!(
            "a ColBERT checkpoint encodes queries and documents differently (markers, expansion, skiplist): pass \
             --role query or --role document"
        );
    };
    cpu_checkpoint_only(args, ("a ColBERT checkpoint runs", "a ColBERT one"))?;
    let mut encoder = embedding::ColbertEncoder::load(dir)
        .with_context(|| format!("loading the ColBERT checkpoint from {}", dir.display()))?;
    encoder.set_batch_size(args.model_args.batch_size.min(64));
    #[allow(clippy::print_stderr)]
    {
        let identity = encoder.identity();
        eprintln!(
            "device: cpu ({:?} kernels); ColBERT encoder {} ({:?}, {} dims, queries of {}{}, documents of {})",
            embedding::Kernels::best(),
            identity.model,
            identity.layout,
            identity.dims,
            identity.query_length,
            if identity.query_expansion { " with expansion" } else { "" },
            identity.document_length
        );
    }
    let started = std::time::Instant::now();
    let (count, modelled) = each_chunk(|texts, out| {
        for encoded in encoder.encode(role, texts, &|_| {})? {
            let vectors: Vec<Vec<f64>> =
                encoded.vectors().map(|row| row.iter().map(|x| f64::from(*x)).collect()).collect();
            let line = serde_json::json!({ "vectors": vectors, "tokens": encoded.tokens });
            writeln!(out, "{line}").context("writing stdout")?;
        }
        Ok(())
    })?;
    report(count, modelled, started, "tokenising, the forward pass and the projection");
    Ok(std::process::ExitCode::SUCCESS)
}

/// Refuses what `embed` cannot give a sparse or ColBERT checkpoint: a GPU (`runs`: what runs on the CPU only) and
/// the dense checkpoints' names (`one`: which checkpoint is named by its digests instead).
fn cpu_checkpoint_only(args: &EmbedArgs, (runs, one): (&str, &str)) -> anyhow::Result<()> {
    match args.model_args.device {
        crate::cli::DeviceArg::Cuda | crate::cli::DeviceArg::Emulated => {
            anyhow::bail!("--device {}: {runs} on the CPU only", args.model_args.device.request().name())
        }
        _ => {}
    }
    if args.model_args.model.is_some() || args.model_args.weights_sha256.is_some() {
        anyhow::bail!("--model and --weights-sha256 name dense checkpoints; {one} is named by its digests");
    }
    Ok(())
}

/// Reads stdin's JSON strings in chunks of [`CHUNK`], hands each to `encode` with stdout, and returns how many
/// texts there were and the time `encode` took.
fn each_chunk(
    mut encode: impl FnMut(&[&str], &mut BufWriter<std::io::StdoutLock<'static>>) -> anyhow::Result<()>,
) -> anyhow::Result<(usize, std::time::Duration)> {
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let (mut count, mut modelled) = (0usize, std::time::Duration::ZERO);
    let mut texts: Vec<String> = Vec::with_capacity(CHUNK);
    let mut flush = |texts: &mut Vec<String>, out: &mut BufWriter<_>| -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        encode(&refs, out)?;
        modelled += start.elapsed();
        count += texts.len();
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
    Ok((count, modelled))
}

/// The closing line on stderr: texts, time in the model (what it covers) and in all.
fn report(count: usize, modelled: std::time::Duration, started: std::time::Instant, covers: &str) {
    let model_seconds = modelled.as_secs_f64();
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "embedded {count} texts in {model_seconds:.3} s in the model ({covers}, the model loaded: {:.0} \
             texts/s), {:.3} s in all with reading and writing",
            count as f64 / model_seconds.max(1e-9),
            started.elapsed().as_secs_f64()
        );
    }
}
