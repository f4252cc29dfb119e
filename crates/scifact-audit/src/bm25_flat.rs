//! `scifact-audit bm25-flat`: Anserini's BM25 flat on a dataset, the lexical baseline BEIR papers cite, written
//! as the TREC run Pyserini writes (`SearchCollection -bm25 -removeQuery -hits 1000`), without Java: the same
//! documents, ranks and printed scores, from `semantic_memory::lucene`, whose terms and score bits CI holds to
//! Anserini's own.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use scifact_eval::{Progress, mean_metrics, query_metrics, read_corpus, recall_at};
use semantic_memory::lucene::{ANSERINI_B, ANSERINI_K1, LuceneBm25, LuceneHit, beir_flat_contents};

use crate::cli::Bm25FlatArgs;
use crate::progress::StageProgress;

/// Anserini's printed scores (`ScoreTiesAdjusterReranker`): each score rounded to four decimals, and a score
/// within 1e-4 of the one printed before it lowered by 1e-6 for each such score in the run of ties so far, so
/// that sorting by printed score keeps the ranking.
fn printed_scores(hits: &[LuceneHit]) -> Vec<f32> {
    let mut printed: Vec<f32> = Vec::with_capacity(hits.len());
    let mut ties = 0u32;
    for hit in hits {
        let mut score = ((f64::from(hit.score) * 10_000.0).round() / 10_000.0) as f32;
        match printed.last() {
            Some(&previous) if previous - score <= 1e-4 => {
                ties += 1;
                score -= 1e-6 * ties as f32;
            }
            _ => ties = 0,
        }
        printed.push(score);
    }
    printed
}

/// Runs the command.
pub(crate) fn run(args: &Bm25FlatArgs) -> anyhow::Result<std::process::ExitCode> {
    let progress = StageProgress::new();
    let corpus = crate::corpus::Corpus::chosen(args.profile, &args.dataset)?;
    let work_dir = match &args.work_dir {
        Some(dir) => dir.clone(),
        None => args.out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned(),
    };
    let (archive, _) = corpus.archive(
        args.archive.as_deref(),
        &work_dir,
        args.accept_archive_digest.as_deref(),
        &progress,
    )?;
    let profile = corpus.profile();
    progress.note(&format!("reading {}", archive.display()));
    let (beir, _) = read_corpus(&archive, &profile)
        .with_context(|| format!("reading {} as {}", archive.display(), profile.name))?;

    let started = std::time::Instant::now();
    progress.start("indexing", beir.documents.len() as u64);
    // Each document's contents made as the index reads it: one block's copies at a time, not the corpus's.
    let index = LuceneBm25::build_reporting(
        beir.documents.iter().map(|d| (d.id.as_str(), beir_flat_contents(&d.title, &d.text))),
        ANSERINI_K1,
        ANSERINI_B,
        &|documents| progress.advance(documents as u64),
    );
    progress.finish();
    let indexed = started.elapsed();

    let mut judged: std::collections::BTreeMap<&str, std::collections::BTreeMap<String, i64>> =
        Default::default();
    for qrel in &beir.qrels {
        judged.entry(qrel.query_id.as_str()).or_default().insert(qrel.doc_id.clone(), qrel.score);
    }
    // Anserini writes its topics in their ids' order.
    let mut queries: Vec<_> = beir.test_queries.iter().collect();
    queries.sort_by(|a, b| a.id.cmp(&b.id));
    let started = std::time::Instant::now();
    let mut run = String::new();
    let mut rows = 0usize;
    let mut per_query = Vec::with_capacity(queries.len());
    let (mut recall_100, mut recall_1000) = (0.0, 0.0);
    let none = std::collections::BTreeMap::new();
    for query in &queries {
        // The printed scores are adjusted over the 1,000 hits, the query's own document among them; it is
        // dropped afterwards (-removeQuery), as Anserini does.
        let hits = index.search(&query.text, args.hits as usize, None);
        let printed = printed_scores(&hits);
        let kept = hits.iter().zip(&printed).filter(|(hit, _)| hit.id != query.id);
        let mut ranked = Vec::new();
        for (rank, (hit, score)) in kept.enumerate() {
            writeln!(run, "{} Q0 {} {} {:.6} {}", query.id, hit.id, rank + 1, score, args.run_tag)?;
            ranked.push(hit.id.clone());
        }
        rows += ranked.len();
        let judgements = judged.get(query.id.as_str()).unwrap_or(&none);
        recall_100 += recall_at(&ranked, judgements, 100);
        recall_1000 += recall_at(&ranked, judgements, 1000);
        per_query.push(query_metrics(&ranked, judgements));
    }
    let searched = started.elapsed();
    safe_fs::write_atomically(&args.out, run.as_bytes())
        .with_context(|| format!("writing the run to {}", args.out.display()))?;

    let stats = index.stats();
    let means = mean_metrics(&per_query);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "BM25 flat    Anserini's: Lucene 9.9.1's English analyzer and BM25 (k1 {ANSERINI_K1}, b {ANSERINI_B})"
    )?;
    writeln!(out, "dataset      {} ({})", profile.name, archive.display())?;
    writeln!(
        out,
        "index        {} documents, {} terms ({} distinct), in {:.2} s",
        stats.documents,
        stats.total_terms,
        stats.unique_terms,
        indexed.as_secs_f64()
    )?;
    writeln!(
        out,
        "queries      {} of the {} split, {} hits each at most: {rows} rows in {:.2} s",
        queries.len(),
        profile.split,
        args.hits,
        searched.as_secs_f64()
    )?;
    let n = queries.len().max(1) as f64;
    writeln!(
        out,
        "nDCG@10      {:.4}   recall@100 {:.4}   recall@1000 {:.4}   (trec_eval's definitions, over every query)",
        means.ndcg_10,
        recall_100 / n,
        recall_1000 / n
    )?;
    writeln!(out, "run          {} (TREC, Anserini's printed scores)", args.out.display())?;
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(score: f32) -> LuceneHit {
        LuceneHit { doc: 0, id: String::new(), score }
    }

    #[test]
    fn printed_scores_round_to_four_decimals_and_step_down_through_ties() {
        let printed = printed_scores(&[hit(6.59876), hit(5.17071), hit(5.17069), hit(5.17065), hit(4.0)]);
        assert_eq!(printed[0], 6.5988);
        assert_eq!(printed[1], 5.1707);
        assert_eq!(printed[2], 5.1707 - 1e-6);
        assert_eq!(printed[3], 5.1707 - 2e-6 + 0.0, "still within 1e-4 of the previous printed score");
        assert_eq!(printed[4], 4.0);
    }
}
