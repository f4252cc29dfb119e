//! Every ranking of every query of every run, recomputed: `ranking.vector` (every vector candidate list is the
//! exact top k of a full scan of the fixture's vectors, ids, order and score bits), `ranking.lexical` (every
//! lexical candidate list is this verifier's own FTS5 ranking of the texts), `fusion.ranking` (every fused list
//! and its normalisation follow from the two recomputed lists, three with a sparse one), `ranking.sparse`
//! (every sparse candidate list is the exact top k of a full scan of the sparse fixture's document vectors),
//! `fusion.scores` (every fused score from its recorded components) and `embedding.values` (vectors re-embedded
//! bit for bit). No sample of queries: all.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::artifacts::{Run, query_id};
use crate::checks::{EmbeddingCheck, Input, Inputs};
use crate::fixture::FixtureView;
use crate::mapping::Mapping;
use crate::recompute::bm25_flat::Ranked;
use crate::recompute::dense::{self, Scans};
use crate::recompute::fusion::{self, Component, Normalization, Plan};
use crate::recompute::lexical::{FTS5_B, FTS5_K1, Lists};
use crate::recompute::sparse::{SparseLists, SparseRule, SparseView};
use crate::report::Report;
use crate::texts::Texts;
use crate::vectors::{Vectors, vector_digest};

type Outcome = Result<String, String>;

/// What every run's checks share: the fact ids in fixture order, the query index of each query id, and the
/// recomputed candidate lists.
struct Shared<'a> {
    query_index: HashMap<&'a str, usize>,
    /// The fact holding the document whose id is the query's own, for the queries that have one: BEIR's
    /// ignore_identical_ids leaves it out of every list of that query.
    own_fact: HashMap<&'a str, i64>,
    vectors: Option<&'a Vectors>,
    dense: Result<Scans, String>,
    /// The first passes of Matryoshka runs: full scans of the truncated vectors, by `candidate_dims`.
    truncated: BTreeMap<usize, Result<Scans, String>>,
    /// Each fact's document index in the vectors, for rescoring Matryoshka candidates.
    row_of: HashMap<i64, usize>,
    lexical: Result<Lists, String>,
    /// The Lucene BM25 lists, for the one Lucene scorer the runs declare.
    lucene: Result<(Scorer, Ranked), String>,
    /// The sparse fixture and its lists, for runs that searched sparse vectors.
    sparse: Result<Recomputed<'a>, String>,
}

/// The sparse fixture, its lists under each rule the runs declare, and the digest of the index its documents
/// make in fact order.
struct Recomputed<'a> {
    view: &'a SparseView,
    lists: HashMap<SparseRule, SparseLists>,
    index_digest: String,
}

impl Recomputed<'_> {
    /// The lists made by `run`'s rule.
    fn lists_of(&self, run: &Run) -> Result<(SparseRule, &SparseLists), String> {
        let rule = sparse_rule(run)?;
        self.lists.get(&rule).map(|lists| (rule, lists)).ok_or_else(|| format!("no lists under {rule:?}"))
    }
}

/// How `run` scores its sparse list and orders equal scores, from its configuration: the exact dot product
/// (`sparse_scoring` left out) or Anserini's impact scoring, ties by fact id (`sparse_ties` left out) or by BEIR
/// document id.
fn sparse_rule(run: &Run) -> Result<SparseRule, String> {
    let config = run.config();
    let impact = match &config["sparse_scoring"] {
        Value::Null => false,
        scoring if scoring == "anserini_impact" => true,
        scoring => {
            return Err(format!(
                "scoring {scoring}: this verifier recomputes the exact dot product and Anserini's impact scoring"
            ));
        }
    };
    Ok(SparseRule { impact, by_document_id: by_document_id(&config["sparse_ties"], "sparse ties")? })
}

/// Whether a list's declared ties (`lexical_ties`, `sparse_ties`) order equal scores by BEIR document id (the
/// store's metadata key for it) rather than by fact id (left out); any other key is not recomputed here.
fn by_document_id(ties: &Value, what: &str) -> Result<bool, String> {
    match ties {
        Value::Null => Ok(false),
        ties if *ties == serde_json::json!({ "metadata_key": BEIR_ID_KEY }) => Ok(true),
        ties => Err(format!(
            "{what} by {ties}: this verifier orders a store's facts by fact id or by their BEIR document id (metadata key {BEIR_ID_KEY:?})"
        )),
    }
}

/// Whether `run` searched by dense vector, lexically, or with sparse vectors.
fn searches(run: &Run) -> (bool, bool, bool) {
    let sparse_fused =
        run.mode() == "hybrid" && run.config()["sparse_weight"].as_f64().is_some_and(|w| w != 0.0);
    match run.mode() {
        "fts_only" => (false, true, false),
        "vector_only" => (true, false, false),
        "sparse_only" => (false, false, true),
        _ => (true, true, sparse_fused),
    }
}

/// A run's Matryoshka candidates, `(candidate_dims, candidate_depth)`, or `None` when it searched the full
/// dimension only (`candidate_dims` null; `candidate_depth` left out at its default, 100).
fn matryoshka(run: &Run) -> Result<Option<(usize, usize)>, String> {
    let config = run.config();
    let Some(dims) = config["candidate_dims"].as_u64() else {
        return match &config["candidate_dims"] {
            Value::Null => Ok(None),
            other => Err(format!("config.candidate_dims is {other}, not a count")),
        };
    };
    let depth = match &config["candidate_depth"] {
        Value::Null => 100,
        depth => depth.as_u64().ok_or_else(|| format!("config.candidate_depth is {depth}, not a count"))?,
    };
    Ok(Some((dims as usize, depth as usize)))
}

/// Query `index`'s dense list as `run` searched it, without the query's own document: the full scan's, or for
/// Matryoshka candidates the truncated scan's first `candidate_depth` ranked by the full vectors, after
/// checking what the receipt says of both stages.
fn dense_list<'s>(
    run: &Run,
    shared: &'s Shared<'_>,
    scans: &'s Scans,
    index: usize,
    id: &str,
    receipt: &Value,
) -> Result<std::borrow::Cow<'s, [(i64, f64)]>, String> {
    let own = shared.own_fact.get(id);
    let Some((dims, depth)) = matryoshka(run)? else {
        let list = scans.list(index).ok_or_else(|| format!("query {id:?} was not scanned"))?;
        return Ok(without_own(list, own));
    };
    let (Some(first), Some(vectors)) = (shared.truncated.get(&dims), shared.vectors) else {
        return Err(format!("query {id:?}: the first pass at {dims} dimensions was not recomputed"));
    };
    let first = first.as_ref().map_err(Clone::clone)?;
    let list = first.list(index).ok_or_else(|| format!("query {id:?} was not scanned"))?;
    let list = without_own(list, own);
    let candidates = &list[..depth.min(list.len())];
    let stated = &receipt["vector"]["matryoshka"];
    let truncated_query = vector_digest(&dense::truncate(vectors.query(index), dims));
    if stated["candidate_dims"].as_u64() != Some(dims as u64)
        || stated["candidate_depth"].as_u64() != Some(depth as u64)
        || stated["rescored_at_full_dims"].as_u64() != Some(candidates.len() as u64)
        || stated["truncated_query_sha256"].as_str() != Some(truncated_query.as_str())
    {
        return Err(format!(
            "query {id:?}: the receipt's Matryoshka stages are {stated}; the configuration and vectors give {dims} dimensions, depth {depth}, {} rescored, truncated query {truncated_query}",
            candidates.len()
        ));
    }
    dense::rescored(candidates, vectors.query(index), vectors, &shared.row_of).map(Into::into)
}

/// The metadata key under which the runner's store keeps each fact's BEIR document id.
const BEIR_ID_KEY: &str = "beir_doc_id";

/// Which scorer a run's lexical lists came from, as its configuration declares.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scorer {
    /// SQLite FTS5's `bm25()` (or the in-memory index equal to it), ties by fact id.
    Fts5,
    /// Lucene's BM25 over Anserini's analyzer at `k1` and `b` (as float32), ties by BEIR document id or by fact
    /// id.
    Lucene { by_document_id: bool, k1: f32, b: f32 },
}

impl Scorer {
    /// What this verifier recomputed the lists with, for the evidence.
    fn name(self) -> String {
        match self {
            Scorer::Fts5 => "this verifier's own FTS5 bm25()".into(),
            Scorer::Lucene { by_document_id, k1, b } => format!(
                "this verifier's own Lucene BM25 over Anserini's analyzer (k1 {k1}, b {b}, ties by {})",
                if by_document_id { "BEIR document id" } else { "fact id" }
            ),
        }
    }
}

/// The scorer `run` declares, or why this verifier cannot recompute it.
fn scorer(run: &Run) -> Result<Scorer, String> {
    let config = run.config();
    if config["lexical_backend"] != "lucene_bm25" {
        return lexical_is_fts5(run).map(|()| Scorer::Fts5);
    }
    let parameter = |key: &str| {
        config[key].as_f64().map(|value| value as f32).ok_or_else(|| format!("config.{key} is not a number"))
    };
    let by_document_id = by_document_id(&config["lexical_ties"], "ties")?;
    Ok(Scorer::Lucene { by_document_id, k1: parameter("bm25_k1")?, b: parameter("bm25_b")? })
}

/// A run's recomputed lexical lists.
#[derive(Clone, Copy)]
enum Source<'a> {
    Fts5(&'a Lists),
    Lucene(Scorer, &'a Ranked),
}

impl<'a> Source<'a> {
    /// The lists for `run`'s scorer from what `shared` recomputed, or why there are none.
    fn of(run: &Run, shared: &'a Shared<'_>) -> Result<Source<'a>, Unchecked> {
        match scorer(run).map_err(Unchecked::NotRecomputable)? {
            Scorer::Fts5 => {
                shared.lexical.as_ref().map(Source::Fts5).map_err(|e| Unchecked::Missing(e.clone()))
            }
            wanted => match &shared.lucene {
                Ok((scorer, ranked)) if *scorer == wanted => Ok(Source::Lucene(wanted, ranked)),
                Ok((scorer, _)) => Err(Unchecked::NotRecomputable(format!(
                    "this verifier recomputes one Lucene scorer per bundle, {scorer:?} here; this run declares {wanted:?}"
                ))),
                Err(reason) => Err(Unchecked::Missing(reason.clone())),
            },
        }
    }

    fn list(self, query: usize) -> Option<&'a [(i64, f64)]> {
        match self {
            Source::Fts5(lists) => lists.list(query),
            Source::Lucene(_, ranked) => ranked.list(query),
        }
    }

    fn depth(self) -> usize {
        match self {
            Source::Fts5(lists) => lists.depth(),
            Source::Lucene(_, ranked) => ranked.depth(),
        }
    }

    fn name(self) -> String {
        match self {
            Source::Fts5(_) => Scorer::Fts5.name(),
            Source::Lucene(scorer, _) => scorer.name(),
        }
    }

    /// That the receipt's record of the query is what the query text gives: the FTS5 expression's digest, or
    /// Lucene's analyzed terms with their counts (and no FTS5 expression, which did not run).
    fn query_evidence(self, id: &str, index: usize, receipt: &Value) -> Result<(), String> {
        let stated = &receipt["query"];
        match self {
            Source::Fts5(lists) => {
                let expression = lists.expression(index).flatten();
                let expected = expression.map(|e| crate::canonical::sha256_tagged(e.as_bytes()));
                if stated["fts_expression_sha256"].as_str() != expected.as_deref() {
                    return Err(format!(
                        "query {id:?}: the receipt's FTS5 expression is {}, the query text gives {}",
                        stated["fts_expression_sha256"],
                        expected.unwrap_or_else(|| "none".into())
                    ));
                }
            }
            Source::Lucene(_, ranked) => {
                let clauses = ranked.clauses(index).ok_or_else(|| format!("query {id:?} was not ranked"))?;
                let expected = serde_json::to_value(clauses).map_err(|e| e.to_string())?;
                if stated["analyzed_terms"] != expected || !stated["fts_expression_sha256"].is_null() {
                    return Err(format!(
                        "query {id:?}: the receipt's analyzed terms are {} (FTS5 expression {}), Anserini's analyzer gives {expected} (and no FTS5 expression)",
                        stated["analyzed_terms"], stated["fts_expression_sha256"]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Why a run's lexical lists were not recomputed: an input missing here, or a scorer this verifier does not
/// recompute.
enum Unchecked {
    Missing(String),
    NotRecomputable(String),
}

/// The ranking checks of every run, the lexical ranking on `lexical_threads` (`embedding.values` is
/// [`embedding`], run beside them).
pub(crate) fn rankings(inputs: &Inputs<'_>, lexical_threads: usize) -> Report {
    let mut report = Report::default();
    let runs = inputs.runs;
    let wants_vector = runs.iter().any(|r| searches(r).0);
    let wants_lexical = runs.iter().any(|r| searches(r).1);
    let wants_sparse = runs.iter().any(|r| searches(r).2);
    let layout = match inputs.fixture {
        Input::Read { content, .. } => layout(content, inputs.mapping),
        Input::Absent(reason) => Err(Unavailable::NotHere(reason.to_owned())),
        Input::Refused(reason) => Err(Unavailable::Broken(reason.to_owned())),
    };
    let shared = match &layout {
        Ok((fact_ids, query_ids)) => {
            let query_index: HashMap<&str, usize> =
                query_ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
            let own_fact: HashMap<&str, i64> = match inputs.fixture {
                Input::Read { content, .. } => {
                    let fact_of: HashMap<&str, i64> = content
                        .document_ids
                        .iter()
                        .map(String::as_str)
                        .zip(fact_ids.iter().copied())
                        .collect();
                    query_ids
                        .iter()
                        .filter_map(|q| fact_of.get(q.as_str()).map(|f| (q.as_str(), *f)))
                        .collect()
                }
                _ => HashMap::new(),
            };
            let mut needed: (Vec<usize>, Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new(), Vec::new());
            let mut depth = 0usize;
            for run in runs {
                let config = run.config();
                // sparse_candidates is left out of configurations at its default, 100.
                let sparse_candidates = config["sparse_candidates"].as_u64().unwrap_or(100) as usize;
                depth = depth.max(sparse_candidates + 1);
                for key in ["top_k", "lexical_candidates", "vector_candidates"] {
                    // One deeper: a list that leaves out the query's own document reaches one further.
                    depth = depth.max(config[key].as_u64().unwrap_or(0) as usize + 1);
                }
                let (dense, lexical, sparse) = searches(run);
                for row in run.rows_or_empty() {
                    if let Some(&index) = query_index.get(query_id(row)) {
                        if dense {
                            needed.0.push(index);
                        }
                        if lexical {
                            needed.1.push(index);
                        }
                        if sparse {
                            needed.2.push(index);
                        }
                    }
                }
            }
            for list in [&mut needed.0, &mut needed.1, &mut needed.2] {
                list.sort_unstable();
                list.dedup();
            }
            let dense = match inputs.vectors {
                Input::Read { content, .. } if wants_vector => {
                    consistent_vectors(content, fact_ids.len(), query_ids.len()).and_then(|()| {
                        Scans::compute(content, fact_ids, &needed.0, depth)
                            .map_err(|e| format!("the vectors could not be read: {e}"))
                    })
                }
                Input::Read { .. } => Err("no run searched by vector".into()),
                Input::Absent(reason) => Err(format!("not checked: {reason}")),
                Input::Refused(reason) => Err(reason.to_owned()),
            };
            let mut first_passes: BTreeMap<usize, usize> = BTreeMap::new();
            for run in runs.iter().filter(|r| searches(r).0) {
                if let Ok(Some((dims, depth))) = matryoshka(run) {
                    let deepest = first_passes.entry(dims).or_insert(0);
                    // One deeper: a list that leaves out the query's own document reaches one further.
                    *deepest = (*deepest).max(depth + 1);
                }
            }
            let truncated = first_passes
                .into_iter()
                .map(|(dims, depth)| {
                    let scans = match inputs.vectors {
                        Input::Read { content, .. } => dense::truncated(content, dims).and_then(|cut| {
                            Scans::compute(&cut, fact_ids, &needed.0, depth)
                                .map_err(|e| format!("the truncated vectors could not be read: {e}"))
                        }),
                        Input::Absent(reason) => Err(format!("not checked: {reason}")),
                        Input::Refused(reason) => Err(reason.to_owned()),
                    };
                    (dims, scans)
                })
                .collect();
            let row_of = fact_ids.iter().enumerate().map(|(row, fact)| (*fact, row)).collect();
            let lexical_runs = || runs.iter().filter(|r| searches(r).1);
            let wants_fts5 = lexical_runs().any(|r| scorer(r) == Ok(Scorer::Fts5));
            let lucene_scorer = lexical_runs().find_map(|r| scorer(r).ok().filter(|s| *s != Scorer::Fts5));
            let lexical = match inputs.texts {
                Input::Read { content, .. } if wants_lexical && wants_fts5 => {
                    Lists::compute(content, fact_ids, &needed.1, depth, lexical_threads)
                }
                Input::Read { .. } => Err("no run searched with FTS5's BM25".into()),
                Input::Absent(reason) => Err(format!("not checked: {reason}")),
                Input::Refused(reason) => Err(reason.to_owned()),
            };
            let lucene = match (inputs.texts, lucene_scorer) {
                (Input::Read { content, .. }, Some(scorer @ Scorer::Lucene { by_document_id, k1, b })) => {
                    let tie_keys: Vec<String> = if by_document_id {
                        content.documents.iter().map(|(id, _, _)| id.clone()).collect()
                    } else {
                        fact_ids.iter().map(|fact| format!("{fact:020}")).collect()
                    };
                    Ok((scorer, Ranked::compute(content, fact_ids, &tie_keys, (k1, b), &needed.1, depth)))
                }
                (Input::Read { .. }, _) => Err("no run searched with Lucene's BM25".into()),
                (Input::Absent(reason), _) => Err(format!("not checked: {reason}")),
                (Input::Refused(reason), _) => Err(reason.to_owned()),
            };
            let sparse = match inputs.sparse {
                Input::Read { content, .. } if wants_sparse => {
                    // One scan per rule the runs declare; a run whose rule is not one is failed on its own.
                    let mut rules: Vec<SparseRule> =
                        runs.iter().filter(|r| searches(r).2).filter_map(|r| sparse_rule(r).ok()).collect();
                    rules.sort_by_key(|rule| (rule.impact, rule.by_document_id));
                    rules.dedup();
                    rules
                        .into_iter()
                        .map(|rule| {
                            SparseLists::compute(content, fact_ids, query_ids, &needed.2, depth, rule)
                                .map(|lists| (rule, lists))
                        })
                        .collect::<Result<HashMap<_, _>, String>>()
                        .map(|lists| Recomputed {
                            view: content,
                            lists,
                            index_digest: content.index_digest(fact_ids),
                        })
                }
                Input::Read { .. } => Err("no run searched with sparse vectors".into()),
                Input::Absent(reason) => Err(format!("not checked: {reason}")),
                Input::Refused(reason) => Err(reason.to_owned()),
            };
            Ok(Shared {
                query_index,
                own_fact,
                vectors: inputs.vectors.content(),
                dense,
                truncated,
                row_of,
                lexical,
                lucene,
                sparse,
            })
        }
        Err(unavailable) => Err(unavailable.clone()),
    };
    for run in runs {
        let rows = run.rows_or_empty();
        let scope = run.name.as_str();
        let shared = match &shared {
            Ok(shared) => shared,
            Err(Unavailable::NotHere(reason)) => {
                for name in names(run) {
                    report.not_checked(scope, name, reason.clone());
                }
                continue;
            }
            Err(Unavailable::Broken(reason)) => {
                for name in names(run) {
                    report.record(scope, name, Err(reason.clone()));
                }
                continue;
            }
        };
        let plan = Plan::of(run.config());
        let (dense, lexical_searched, sparse_searched) = searches(run);
        if sparse_searched {
            match &shared.sparse {
                Ok(recomputed) => {
                    report.record(scope, "ranking.sparse", sparse(run, rows, shared, recomputed))
                }
                Err(reason) => unavailable(&mut report, scope, "ranking.sparse", reason),
            }
        }
        if dense {
            match &shared.dense {
                Ok(scans) => report.record(scope, "ranking.vector", vector(run, rows, shared, scans)),
                Err(reason) => unavailable(&mut report, scope, "ranking.vector", reason),
            }
        }
        let source = Source::of(run, shared);
        if lexical_searched {
            match &source {
                Ok(lists) => report.record(scope, "ranking.lexical", lexical(run, rows, shared, *lists)),
                Err(Unchecked::Missing(reason)) => unavailable(&mut report, scope, "ranking.lexical", reason),
                Err(Unchecked::NotRecomputable(reason)) => {
                    report.not_checked(scope, "ranking.lexical", reason)
                }
            }
        }
        if run.mode() == "hybrid" {
            let third = match (sparse_searched, &shared.sparse) {
                (false, _) => Ok(None),
                (true, Ok(recomputed)) => match recomputed.lists_of(run) {
                    Ok((_, lists)) => Ok(Some(lists)),
                    Err(reason) => {
                        report.record(scope, "fusion.ranking", Err(reason));
                        continue;
                    }
                },
                (true, Err(reason)) => Err(reason),
            };
            match (&shared.dense, &source, &plan, third) {
                (Ok(scans), Ok(lists), Ok(plan), Ok(third)) => report.record(
                    scope,
                    "fusion.ranking",
                    fused(run, rows, shared, scans, *lists, third, plan),
                ),
                (_, _, Err(reason), _) => report.record(scope, "fusion.ranking", Err(reason.clone())),
                (Err(reason), _, _, _)
                | (_, Err(Unchecked::Missing(reason)), _, _)
                | (_, _, _, Err(reason)) => unavailable(&mut report, scope, "fusion.ranking", reason),
                (_, Err(Unchecked::NotRecomputable(reason)), _, _) => {
                    report.not_checked(scope, "fusion.ranking", reason)
                }
            }
        }
    }
    report
}

/// Why the recomputation cannot run at all: an input not given here, or one given but broken.
#[derive(Debug, Clone)]
enum Unavailable {
    NotHere(String),
    Broken(String),
}

fn names(run: &Run) -> Vec<&'static str> {
    let (dense, lexical, sparse) = searches(run);
    let mut names = Vec::new();
    if sparse {
        names.push("ranking.sparse");
    }
    if dense {
        names.push("ranking.vector");
    }
    if lexical {
        names.push("ranking.lexical");
    }
    if run.mode() == "hybrid" {
        names.push("fusion.ranking");
    }
    names
}

/// A recomputation that could not run: not checked when an input is absent, failed when it was broken.
fn unavailable(report: &mut Report, scope: &str, name: &str, reason: &str) {
    match reason.strip_prefix("not checked: ") {
        Some(reason) => report.not_checked(scope, name, reason),
        None => report.record(scope, name, Err(reason.to_owned())),
    }
}

/// The fact id of every document in fixture order, from the mapping (which must list the fixture's documents
/// in order, each under its own fact id), and every query id in fixture order (by id for a version 1 view,
/// which does not record it).
fn layout(view: &FixtureView, mapping: Input<'_, Mapping>) -> Result<(Vec<i64>, Vec<String>), Unavailable> {
    // A version 1 view does not record the fixture's query order; texts are then ordered by id alike.
    let query_ids =
        view.query_ids.clone().unwrap_or_else(|| view.query_text_sha256.keys().cloned().collect());
    let mapping = match mapping {
        Input::Read { content, .. } => content,
        Input::Absent(reason) => return Err(Unavailable::NotHere(reason.to_owned())),
        Input::Refused(reason) => return Err(Unavailable::Broken(reason.to_owned())),
    };
    if let Err(e) = &mapping.json {
        return Err(Unavailable::Broken(format!("the mapping: {e}")));
    }
    let entries = mapping.entries();
    if entries.len() != view.document_ids.len() {
        return Err(Unavailable::Broken(format!(
            "the mapping has {} entries for {} documents",
            entries.len(),
            view.document_ids.len()
        )));
    }
    let mut fact_ids = Vec::with_capacity(entries.len());
    let mut seen = HashSet::with_capacity(entries.len());
    for (entry, id) in entries.iter().zip(&view.document_ids) {
        match (entry.fact_id.as_i64(), entry.doc_id.as_str()) {
            (Some(fact), Some(_)) if !seen.insert(fact) => {
                return Err(Unavailable::Broken(format!(
                    "the mapping gives fact id {fact} to two documents"
                )));
            }
            (Some(fact), Some(doc)) if doc == id => fact_ids.push(fact),
            _ => {
                return Err(Unavailable::Broken(format!(
                    "mapping entry {entry} is not document {id:?} in fixture order"
                )));
            }
        }
    }
    Ok((fact_ids, query_ids))
}

fn consistent_vectors(vectors: &Vectors, documents: usize, queries: usize) -> Result<(), String> {
    if vectors.document_count() != documents || vectors.query_count() != queries {
        return Err(format!(
            "the vectors hold {} documents and {} queries; the fixture has {documents} and {queries}",
            vectors.document_count(),
            vectors.query_count()
        ));
    }
    Ok(())
}

/// FTS5's `bm25()` fixes k1 and b; a run configured otherwise cannot be recomputed by it.
fn lexical_is_fts5(run: &Run) -> Result<(), String> {
    let config = run.config();
    let k1 = config["bm25_k1"].as_f64().unwrap_or(FTS5_K1);
    let b = config["bm25_b"].as_f64().unwrap_or(FTS5_B);
    if k1 == FTS5_K1 && b == FTS5_B {
        Ok(())
    } else {
        Err(format!("k1 {k1} and b {b}: FTS5's bm25() recomputes only k1 {FTS5_K1} and b {FTS5_B}"))
    }
}

/// A row's query index, receipt and hits.
type Parts<'r> = (usize, &'r Value, &'r [Value]);

fn parts<'r>(row: &'r Value, shared: &Shared<'_>) -> Result<Option<Parts<'r>>, String> {
    let id = query_id(row);
    let receipt = &row["receipt"];
    if receipt.is_null() {
        return Ok(None);
    }
    let index = *shared.query_index.get(id).ok_or_else(|| format!("query {id:?} is not in the fixture"))?;
    let hits = receipt["hits"].as_array().ok_or_else(|| format!("query {id:?}: the receipt has no hits"))?;
    let own = shared.own_fact.get(id).copied();
    let stated = match &receipt["excluded_facts"] {
        Value::Null => Some(Vec::new()),
        Value::Array(facts) => facts.iter().map(Value::as_i64).collect::<Option<Vec<i64>>>(),
        _ => None,
    };
    if stated != Some(own.into_iter().collect()) {
        return Err(format!(
            "query {id:?}: the receipt leaves out {}, BEIR's rule leaves out {} (the document whose id is the query's own)",
            receipt["excluded_facts"],
            own.map_or_else(|| "nothing".to_owned(), |fact| format!("fact {fact}"))
        ));
    }
    Ok(Some((index, receipt, hits)))
}

/// A recomputed list without the query's own document (BEIR's ignore_identical_ids), as the search saw it.
fn without_own<'l>(list: &'l [(i64, f64)], own: Option<&i64>) -> std::borrow::Cow<'l, [(i64, f64)]> {
    match own {
        Some(own) if list.iter().any(|(fact, _)| fact == own) => {
            list.iter().filter(|(fact, _)| fact != own).copied().collect::<Vec<_>>().into()
        }
        _ => list.into(),
    }
}

/// `sparse_candidates`, which configurations leave out at its default (100).
fn sparse_candidates(run: &Run) -> Result<usize, String> {
    match &run.config()["sparse_candidates"] {
        Value::Null => Ok(100),
        _ => candidates(run, "sparse_candidates"),
    }
}

fn candidates(run: &Run, key: &str) -> Result<usize, String> {
    run.config()[key].as_u64().map(|n| n as usize).ok_or_else(|| format!("config.{key} is not a count"))
}

/// Positions of the facts in the first `depth` entries of a list.
fn positions(list: &[(i64, f64)], depth: usize) -> HashMap<i64, usize> {
    list.iter().take(depth).enumerate().map(|(i, (fact, _))| (*fact, i)).collect()
}

fn bits(value: &Value) -> Option<u64> {
    value.as_f64().map(f64::to_bits)
}

/// Compares a hit's component with the recomputed list: present, it is the fact at its rank with its score
/// bits; absent, the fact is not among the list's first `depth`.
fn component(
    id: &str,
    what: &str,
    hit: &Value,
    list: &[(i64, f64)],
    at: &HashMap<i64, usize>,
    depth: usize,
) -> Result<(), String> {
    let fact = hit["fact_id"].as_i64().ok_or_else(|| format!("query {id:?}: a hit has no fact id"))?;
    let recorded = &hit[what];
    match (recorded.is_null(), at.get(&fact)) {
        (true, None) => Ok(()),
        (true, Some(position)) => Err(format!(
            "query {id:?}: fact {fact} is {what} candidate {} of {depth} in the recomputation, but the receipt says it was not a candidate",
            position + 1
        )),
        (false, position) => {
            let rank = recorded["rank"].as_u64().unwrap_or(0) as usize;
            let expected = position.map(|p| (p + 1, list[*p].1));
            if expected.map(|(r, s)| (r, s.to_bits())) != Some((rank, bits(&recorded["score"]).unwrap_or(0)))
            {
                return Err(format!(
                    "query {id:?}: fact {fact}'s {what} component is rank {rank} score {}, the recomputation has {}",
                    recorded["score"],
                    expected.map_or_else(
                        || format!("no such candidate in the first {depth}"),
                        |(r, s)| format!("rank {r} score {s}")
                    )
                ));
            }
            Ok(())
        }
    }
}

/// A convex receipt's normalisation of one list, and every hit's normalised value of it, against the
/// recomputed list.
fn normalisation(id: &str, what: &str, receipt: &Value, recomputed: &Normalization) -> Result<(), String> {
    let recorded = &receipt["fusion"][what];
    for (field, value) in
        [("shift", recomputed.shift), ("scale", recomputed.scale), ("missing", recomputed.missing)]
    {
        if bits(&recorded[field]) != Some(value.to_bits()) {
            return Err(format!(
                "query {id:?}: the receipt normalises the {what} list with {field} {}, its recomputed candidates give {value}",
                recorded[field]
            ));
        }
    }
    Ok(())
}

fn query_vector_bound(id: &str, receipt: &Value, query: &[f32]) -> Result<(), String> {
    let digest = vector_digest(query);
    if receipt["query"]["vector_sha256"].as_str() != Some(digest.as_str()) {
        return Err(format!(
            "query {id:?}: the receipt searched vector {}, the fixture's query vector is {digest}",
            receipt["query"]["vector_sha256"]
        ));
    }
    Ok(())
}

fn vector(run: &Run, rows: &[Value], shared: &Shared<'_>, scans: &Scans) -> Outcome {
    let vector_only = run.mode() == "vector_only";
    let depth = if vector_only { candidates(run, "top_k")? } else { candidates(run, "vector_candidates")? };
    if depth > scans.depth() {
        return Err(format!("{depth} candidates asked, more than the {} scanned", scans.depth()));
    }
    let (mut queries, mut hits_checked) = (0, 0);
    for row in rows {
        let Some((index, receipt, hits)) = parts(row, shared)? else { continue };
        let id = query_id(row);
        let list = &*dense_list(run, shared, scans, index, id, receipt)?;
        if let Some(vectors) = shared.vectors {
            query_vector_bound(id, receipt, vectors.query(index))?;
        }
        if vector_only {
            let expected = &list[..depth.min(list.len())];
            if hits.len() != expected.len() {
                return Err(format!(
                    "query {id:?}: {} hits, the full scan's top {depth} has {}",
                    hits.len(),
                    expected.len()
                ));
            }
            for (position, (hit, (fact, score))) in hits.iter().zip(expected).enumerate() {
                if hit["fact_id"].as_i64() != Some(*fact) || bits(&hit["score"]) != Some(score.to_bits()) {
                    return Err(format!(
                        "query {id:?} rank {}: the receipt has fact {} score {}, {} has fact {fact} score {score}",
                        position + 1,
                        hit["fact_id"],
                        hit["score"],
                        searched(run, scans)
                    ));
                }
            }
        } else {
            let at = positions(list, depth);
            for hit in hits {
                component(id, "vector", hit, list, &at, depth)?;
            }
            if receipt["config"]["fusion"]["method"] == "convex" {
                let plan = Plan::of(&receipt["config"])?;
                if let fusion::Method::Convex { z_score, missing_lowest } = plan.method {
                    let normal = fusion::normalize(&list[..depth.min(list.len())], z_score, missing_lowest);
                    normalisation(id, "vector", receipt, &normal)?;
                }
            }
        }
        let returned = receipt["vector"]["returned"].as_u64();
        if returned != Some(depth.min(list.len()) as u64) && returned.is_some() {
            return Err(format!(
                "query {id:?}: the vector evidence says {returned:?} returned, the scan gives {}",
                depth.min(list.len())
            ));
        }
        queries += 1;
        hits_checked += hits.len();
    }
    let list = match matryoshka(run) {
        Ok(Some(_)) => format!("the top {depth} of {}", searched(run, scans)),
        _ => format!("the exact top {depth} of a full scan of {} document vectors", scans.documents),
    };
    Ok(format!(
        "{queries} queries: each query vector is the one its receipt searched, and every vector candidate list ({hits_checked} hits) is {list}, ids, ranks and score bits"
    ))
}

/// What a run's dense list came from, for the evidence: a full scan, or Matryoshka's two stages.
fn searched(run: &Run, scans: &Scans) -> String {
    match matryoshka(run) {
        Ok(Some((dims, depth))) => format!(
            "the exact top {depth} of a full scan of {} document vectors cut to {dims} dimensions and renormalised, ranked by the full vectors' dot product",
            scans.documents
        ),
        _ => format!("a full scan of {} vectors", scans.documents),
    }
}

/// `ranking.sparse`: each query's sparse vector is the one its receipt searched, the index the receipt names is
/// the sparse fixture's documents, and every sparse list (the whole answer of sparse_only, or hybrid's sparse
/// candidates) is a full scan's.
fn sparse(run: &Run, rows: &[Value], shared: &Shared<'_>, recomputed: &Recomputed<'_>) -> Outcome {
    let Recomputed { view, index_digest, .. } = recomputed;
    let (rule, lists) = recomputed.lists_of(run)?;
    let sparse_only = run.mode() == "sparse_only";
    let depth = if sparse_only { candidates(run, "top_k")? } else { sparse_candidates(run)? };
    if depth > lists.depth() {
        return Err(format!("{depth} candidates asked, more than the {} scanned", lists.depth()));
    }
    let queries_by_id: HashMap<&str, &crate::recompute::sparse::Entry> =
        view.queries.iter().map(|q| (q.id.as_str(), q)).collect();
    let (mut queries, mut hits_checked) = (0, 0);
    for row in rows {
        let Some((index, receipt, hits)) = parts(row, shared)? else { continue };
        let id = query_id(row);
        let query = queries_by_id.get(id).ok_or_else(|| format!("the sparse fixture has no query {id:?}"))?;
        let digest = query.digest();
        if receipt["query"]["sparse_sha256"].as_str() != Some(digest.as_str()) {
            return Err(format!(
                "query {id:?}: the receipt searched sparse vector {}, the sparse fixture's is {digest}",
                receipt["query"]["sparse_sha256"]
            ));
        }
        let evidence = &receipt["sparse"];
        if evidence["exact"] != true {
            return Err(format!("query {id:?}: the sparse evidence does not say its scores are exact"));
        }
        if evidence["index_digest"].as_str() != Some(index_digest.as_str()) {
            return Err(format!(
                "query {id:?}: the receipt's sparse index is {}, the sparse fixture's documents in fact order give {index_digest}",
                evidence["index_digest"]
            ));
        }
        let list = lists.list(index).ok_or_else(|| format!("query {id:?} was not scanned"))?;
        let list = &*without_own(list, shared.own_fact.get(id));
        if sparse_only {
            let expected = &list[..depth.min(list.len())];
            if hits.len() != expected.len() {
                return Err(format!(
                    "query {id:?}: {} hits, the full scan's top {depth} has {}",
                    hits.len(),
                    expected.len()
                ));
            }
            for (position, (hit, (fact, score))) in hits.iter().zip(expected).enumerate() {
                if hit["fact_id"].as_i64() != Some(*fact) || bits(&hit["score"]) != Some(score.to_bits()) {
                    return Err(format!(
                        "query {id:?} rank {}: the receipt has fact {} score {}, a full scan of {} sparse vectors has fact {fact} score {score}",
                        position + 1,
                        hit["fact_id"],
                        hit["score"],
                        lists.documents
                    ));
                }
            }
        } else {
            let at = positions(list, depth);
            for hit in hits {
                component(id, "sparse", hit, list, &at, depth)?;
            }
            if receipt["config"]["fusion"]["method"] == "convex" {
                let plan = Plan::of(&receipt["config"])?;
                if let fusion::Method::Convex { z_score, missing_lowest } = plan.method {
                    let normal = fusion::normalize(&list[..depth.min(list.len())], z_score, missing_lowest);
                    normalisation(id, "sparse", receipt, &normal)?;
                }
            }
        }
        let returned = evidence["returned"].as_u64();
        if returned != Some(depth.min(list.len()) as u64) {
            return Err(format!(
                "query {id:?}: the sparse evidence says {returned:?} returned, the scan gives {}",
                depth.min(list.len())
            ));
        }
        queries += 1;
        hits_checked += hits.len();
    }
    Ok(format!(
        "{queries} queries: each query's sparse vector is the sparse fixture's ({}), and every sparse candidate list ({hits_checked} hits) is the exact top {depth} of a full scan of {} document sparse vectors ({}), ids, ranks and score bits",
        view.sha256,
        lists.documents,
        rule.describe()
    ))
}

fn lexical(run: &Run, rows: &[Value], shared: &Shared<'_>, lists: Source<'_>) -> Outcome {
    let fts_only = run.mode() == "fts_only";
    let depth = if fts_only { candidates(run, "top_k")? } else { candidates(run, "lexical_candidates")? };
    if depth > lists.depth() {
        return Err(format!("{depth} candidates asked, more than the {} ranked", lists.depth()));
    }
    let (mut queries, mut hits_checked) = (0, 0);
    for row in rows {
        let Some((index, receipt, hits)) = parts(row, shared)? else { continue };
        let id = query_id(row);
        let list = lists.list(index).ok_or_else(|| format!("query {id:?} was not ranked"))?;
        let list = &*without_own(list, shared.own_fact.get(id));
        lists.query_evidence(id, index, receipt)?;
        if fts_only {
            let expected = &list[..depth.min(list.len())];
            if hits.len() != expected.len() {
                return Err(format!(
                    "query {id:?}: {} hits, the recomputed top {depth} has {}",
                    hits.len(),
                    expected.len()
                ));
            }
            for (position, (hit, (fact, score))) in hits.iter().zip(expected).enumerate() {
                if hit["fact_id"].as_i64() != Some(*fact) || bits(&hit["score"]) != Some(score.to_bits()) {
                    return Err(format!(
                        "query {id:?} rank {}: the receipt has fact {} score {}, {} has fact {fact} score {score}",
                        position + 1,
                        hit["fact_id"],
                        hit["score"],
                        lists.name()
                    ));
                }
            }
        } else {
            let at = positions(list, depth);
            for hit in hits {
                component(id, "lexical", hit, list, &at, depth)?;
            }
            if receipt["config"]["fusion"]["method"] == "convex" {
                let plan = Plan::of(&receipt["config"])?;
                if let fusion::Method::Convex { z_score, missing_lowest } = plan.method {
                    let normal = fusion::normalize(&list[..depth.min(list.len())], z_score, missing_lowest);
                    normalisation(id, "lexical", receipt, &normal)?;
                }
            }
        }
        let returned = receipt["lexical"]["returned"].as_u64();
        if returned.is_some() && returned != Some(depth.min(list.len()) as u64) {
            return Err(format!(
                "query {id:?}: the lexical evidence says {returned:?} returned, the recomputation gives {}",
                depth.min(list.len())
            ));
        }
        queries += 1;
        hits_checked += hits.len();
    }
    let rebuilt = match lists {
        Source::Fts5(_) => "each FTS5 expression rebuilt from the query text",
        Source::Lucene(..) => "each query's analyzed terms rebuilt from its text",
    };
    Ok(format!(
        "{queries} queries: {rebuilt}, and every lexical candidate list ({hits_checked} hits) is {} top {depth}, ids, ranks and score bits",
        lists.name()
    ))
}

fn fused(
    run: &Run,
    rows: &[Value],
    shared: &Shared<'_>,
    scans: &Scans,
    lists: Source<'_>,
    third: Option<&SparseLists>,
    plan: &Plan,
) -> Outcome {
    let lexical_depth = candidates(run, "lexical_candidates")?;
    let vector_depth = candidates(run, "vector_candidates")?;
    let sparse_depth = sparse_candidates(run)?;
    let mut queries = 0;
    for row in rows {
        let Some((index, receipt, hits)) = parts(row, shared)? else { continue };
        let id = query_id(row);
        let Some(l) = lists.list(index) else {
            return Err(format!("query {id:?} was not recomputed"));
        };
        let l = without_own(l, shared.own_fact.get(id));
        let v = dense_list(run, shared, scans, index, id, receipt)?;
        let receipt_plan = Plan::of(&receipt["config"])?;
        if receipt_plan != *plan {
            return Err(format!(
                "query {id:?}: the receipt fuses under another configuration than the aggregate's"
            ));
        }
        let s = match third {
            Some(third) => {
                let list = third.list(index).ok_or_else(|| format!("query {id:?} was not recomputed"))?;
                Some(without_own(list, shared.own_fact.get(id)))
            }
            None => None,
        };
        let s = s.as_ref().map(|s| &s[..sparse_depth.min(s.len())]);
        let (expected, _) =
            fusion::fuse(&l[..lexical_depth.min(l.len())], &v[..vector_depth.min(v.len())], s, plan);
        if hits.len() != expected.len() {
            return Err(format!(
                "query {id:?}: {} hits, fusion of the recomputed lists gives {}",
                hits.len(),
                expected.len()
            ));
        }
        for (position, (hit, want)) in hits.iter().zip(&expected).enumerate() {
            let same_component = |recorded: &Value, want: Option<Component>| match want {
                None => recorded.is_null(),
                Some(c) => {
                    recorded["rank"].as_u64() == Some(c.rank as u64)
                        && bits(&recorded["score"]) == Some(c.score.to_bits())
                        && recorded["normalized"].as_f64().map(f64::to_bits) == c.normalized.map(f64::to_bits)
                }
            };
            if hit["fact_id"].as_i64() != Some(want.fact)
                || hit["rank"].as_u64() != Some(position as u64 + 1)
                || bits(&hit["score"]) != Some(want.score.to_bits())
                || !same_component(&hit["lexical"], want.lexical)
                || !same_component(&hit["vector"], want.vector)
                || !same_component(&hit["sparse"], want.sparse)
            {
                return Err(format!(
                    "query {id:?} rank {}: the receipt has fact {} score {}, fusing the recomputed lists gives fact {} score {}",
                    position + 1,
                    hit["fact_id"],
                    hit["score"],
                    want.fact,
                    want.score
                ));
            }
        }
        queries += 1;
    }
    let sparse_part = if third.is_some() {
        format!(" and sparse top {sparse_depth} (weight {})", plan.sparse_weight)
    } else {
        String::new()
    };
    Ok(format!(
        "{queries} queries: every fused list (ids, ranks, score bits, components, normalisation) follows from the recomputed lexical top {lexical_depth} and vector top {vector_depth}{sparse_part} under {}",
        match plan.method {
            fusion::Method::Rrf { k } => format!("reciprocal rank fusion, k {k}"),
            fusion::Method::Convex { z_score, missing_lowest } => format!(
                "a convex combination of {} scores, a missing document {}",
                if z_score { "z-score" } else { "min-max" },
                if missing_lowest { "at the lowest" } else { "at zero" }
            ),
        }
    ))
}

/// `embedding.values`: every query and every document (or a sample of them, from randomness the signer cannot
/// predict) re-embedded with the declared model and compared bit for bit. A sample is recorded as `sampled`,
/// never as a pass, and the report carries its extent and bound.
pub(crate) fn embedding(inputs: &Inputs<'_>) -> Report {
    let mut report = Report::default();
    let scope = "global";
    let EmbeddingCheck { model_dir, sample, seed, progress, shards, device, memo } = inputs.embedding;
    let (vectors, texts, view) = match (inputs.vectors, inputs.texts, inputs.fixture) {
        (Input::Read { content: v, .. }, Input::Read { content: t, .. }, Input::Read { content: f, .. }) => {
            (v, t, f)
        }
        (Input::Refused(reason), _, _) | (_, Input::Refused(reason), _) | (_, _, Input::Refused(reason)) => {
            report.record(scope, "embedding.values", Err(reason.to_owned()));
            return report;
        }
        (Input::Absent(reason), _, _) | (_, Input::Absent(reason), _) | (_, _, Input::Absent(reason)) => {
            report.not_checked(scope, "embedding.values", reason);
            return report;
        }
    };
    let identity = &view.metadata["embedding"];
    let backend = identity["backend"].as_str().unwrap_or("");
    if backend != embedding::BACKEND && backend != "candle" {
        report.not_checked(
            scope,
            "embedding.values",
            format!("the fixture was embedded by {backend:?}; only the in-process BERT forward pass re-runs offline"),
        );
        return report;
    }
    for run in inputs.runs {
        if &run.aggregate["embedding"] != identity {
            report.record(
                scope,
                "embedding.values",
                Err(format!("{} declares another embedding identity than the fixture", run.name)),
            );
            return report;
        }
    }
    if let Some(shards) = shards {
        if *sample != crate::recompute::embedding::Sample::All {
            report.record(
                scope,
                "embedding.values",
                Err("shard results re-embed every vector; a sample is not taken from them".into()),
            );
            return report;
        }
        let result = consistent_vectors(vectors, texts.documents.len(), texts.queries.len()).and_then(|()| {
            crate::shard::merge(
                shards,
                inputs.manifest_sha256,
                identity,
                texts.documents.len(),
                texts.queries.len(),
            )
        });
        report.notes.push(
            "embeddings: taken from shard results (--embedding-shards), not re-embedded in this process; \
             embedding.values names each result and what it rests on"
                .to_owned(),
        );
        report.record(scope, "embedding.values", result);
        report.embedding = Some(crate::recompute::embedding::extent(texts.documents.len(), texts, *seed));
        return report;
    }
    let Some(model_dir) = model_dir else {
        report.not_checked(scope, "embedding.values", "no model directory (pass --model-dir)");
        return report;
    };
    let chosen = crate::recompute::embedding::draw(texts.documents.len(), *sample, *seed);
    let extent = crate::recompute::embedding::extent(chosen.len(), texts, *seed);
    if extent.sampled() {
        report.notes.push(format!(
            "embedding.values: {} of {} documents drawn with seed {seed} (replay with --embedding-sample {} --seed {seed}), and every query",
            chosen.len(),
            texts.documents.len(),
            chosen.len()
        ));
    }
    let policy = match crate::texts::Policy::of(&view.metadata) {
        Ok(policy) => policy,
        Err(reason) => {
            report.record(scope, "embedding.values", Err(reason));
            return report;
        }
    };
    // One vector per text, or the comparison would index past the vectors.
    let result = consistent_vectors(vectors, texts.documents.len(), texts.queries.len()).and_then(|()| {
        crate::recompute::embedding::recheck(
            identity,
            policy,
            (model_dir, *device),
            texts,
            vectors,
            &chosen,
            progress,
            memo.as_deref(),
        )
    });
    if extent.sampled() {
        report.sampled(
            scope,
            "embedding.values",
            result.map(|evidence| format!("{evidence}; {}", extent.sentence())),
        );
    } else {
        report.record(scope, "embedding.values", result);
    }
    report.embedding = Some(extent);
    report
}

/// `fusion.scores`: every hybrid hit's score recomputed from its recorded components under the receipt's own
/// configuration (the components themselves are `ranking.*`'s and `fusion.ranking`'s to recompute).
pub(crate) fn fusion_scores(run: &Run, rows: &[Value]) -> Outcome {
    let mode = run.mode();
    if mode != "hybrid" {
        return Ok(format!("{mode} does not fuse"));
    }
    let mut hits = 0;
    let mut methods = std::collections::BTreeSet::new();
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        let id = query_id(row);
        let receipt = &row["receipt"];
        let plan = Plan::of(&receipt["config"]).map_err(|e| format!("query {id:?}: {e}"))?;
        // The library fuses a third list only when its weight is not 0.
        let fuses_sparse = plan.sparse_weight != 0.0;
        let Some(list) = receipt["hits"].as_array() else {
            return Err(format!("query {id:?}: the receipt has no hits array"));
        };
        let number = |value: &Value, what: &str| {
            value.as_f64().ok_or_else(|| format!("query {id:?}: {what} is not a number"))
        };
        for hit in list {
            let recorded = number(&hit["score"], "a hit's score")?;
            let fact = &hit["fact_id"];
            let expected = match plan.method {
                fusion::Method::Rrf { k } => {
                    methods.insert("rrf");
                    let part = |component: &Value, weight: f64| -> Result<f64, String> {
                        if component.is_null() {
                            return Ok(0.0);
                        }
                        Ok(weight / (k + number(&component["rank"], "a component's rank")?))
                    };
                    let two =
                        part(&hit["lexical"], plan.fts_weight)? + part(&hit["vector"], plan.vector_weight)?;
                    if fuses_sparse { two + part(&hit["sparse"], plan.sparse_weight)? } else { two }
                }
                fusion::Method::Convex { z_score, .. } => {
                    methods.insert("convex");
                    let degenerate = if z_score { 0.0 } else { 1.0 };
                    let part = |component: &Value, name: &str| -> Result<f64, String> {
                        let normal = &receipt["fusion"][name];
                        let shift = number(&normal["shift"], "fusion shift")?;
                        let scale = number(&normal["scale"], "fusion scale")?;
                        if component.is_null() {
                            return number(&normal["missing"], "fusion missing");
                        }
                        let raw = number(&component["score"], "a component's score")?;
                        let value = if scale > 0.0 { (raw - shift) / scale } else { degenerate };
                        let recorded = number(&component["normalized"], "a component's normalized score")?;
                        if value.to_bits() != recorded.to_bits() {
                            return Err(format!(
                                "query {id:?}: fact {fact}'s {name} score {raw} normalises to {value}, the receipt says {recorded}"
                            ));
                        }
                        Ok(value)
                    };
                    let two = plan.fts_weight * part(&hit["lexical"], "lexical")?
                        + plan.vector_weight * part(&hit["vector"], "vector")?;
                    if fuses_sparse {
                        two + plan.sparse_weight * part(&hit["sparse"], "sparse")?
                    } else {
                        two
                    }
                }
            };
            if expected.to_bits() != recorded.to_bits() {
                return Err(format!(
                    "query {id:?}: fact {fact} scored {recorded}, its components give {expected}"
                ));
            }
            hits += 1;
        }
        let scores: Vec<f64> = list.iter().filter_map(|h| h["score"].as_f64()).collect();
        if scores.windows(2).any(|w| w[0] < w[1]) {
            return Err(format!("query {id:?}: hits are not in descending score order"));
        }
    }
    let methods: Vec<&str> = methods.into_iter().collect();
    Ok(format!(
        "{hits} fused scores recomputed bit for bit from their recorded components ({})",
        methods.join(", ")
    ))
}

/// A name the signer gives the sparse checkpoint (`named_by_signer`) is one the published-rows registry lists:
/// the runner takes no other, and an unlisted one would compare with no row while reading like a claim.
fn signer_name_known(view: &SparseView) -> Result<(), String> {
    match &view.named_by_signer {
        Some(name) => {
            let known = crate::checks::published::sparse_model_names();
            if known.contains(name) {
                Ok(())
            } else {
                Err(format!(
                    "the sparse fixture names its checkpoint {name:?}, which no published row names (the registry's: {})",
                    known.join(", ")
                ))
            }
        }
        None => Ok(()),
    }
}

/// `sparse.identity`: the sparse fixture is the one every sparse run binds (its digest and model), it pairs with
/// the runs' fixture, and each entry is the text it says (the model's text policy: `title text` stripped, the
/// query as written), in the texts' order, when the texts are here.
pub(crate) fn sparse_identity(view: &SparseView, runs: &[Run], texts: Option<&Texts>) -> Outcome {
    signer_name_known(view)?;
    let mut bound = 0;
    for run in runs.iter().filter(|run| !run.aggregate["sparse"].is_null()) {
        let name = &run.name;
        let recorded = run.str_at("/sparse/fixture_sha256");
        if recorded != view.sha256 {
            return Err(format!("{name} binds sparse fixture {recorded}, the file is {}", view.sha256));
        }
        if run.str_at("/corpus/fixture_sha256") != view.fixture_sha256 {
            return Err(format!(
                "{name} ran on fixture {}, the sparse fixture pairs with {}",
                run.str_at("/corpus/fixture_sha256"),
                view.fixture_sha256
            ));
        }
        if run.aggregate["sparse"]["model"] != view.model {
            return Err(format!("{name} records another sparse model than the sparse fixture's"));
        }
        if run.aggregate["sparse"]["documents"].as_u64() != Some(view.documents.len() as u64) {
            return Err(format!(
                "{name} says {} documents have a sparse vector, the sparse fixture holds {}",
                run.aggregate["sparse"]["documents"],
                view.documents.len()
            ));
        }
        bound += 1;
    }
    let Some(texts) = texts else {
        return Ok(format!(
            "{bound} runs bind this sparse fixture ({}) and its model; its texts were not checked (no texts here)",
            view.sha256
        ));
    };
    let policy = crate::texts::Policy::Model;
    let pairs = [
        (
            "document",
            texts.documents.iter().map(|(id, _, _)| id).collect::<Vec<_>>(),
            texts.document_semantic_digests(policy),
            &view.documents,
        ),
        (
            "query",
            texts.queries.iter().map(|(id, _)| id).collect(),
            texts.query_semantic_digests(policy),
            &view.queries,
        ),
    ];
    for (what, ids, digests, entries) in pairs {
        if ids.len() != entries.len() {
            return Err(format!("{} {what} entries, the texts hold {}", entries.len(), ids.len()));
        }
        for ((id, digest), entry) in ids.iter().zip(&digests).zip(entries) {
            if &entry.id != *id || &entry.text_sha256 != digest {
                return Err(format!(
                    "the sparse fixture's {what} entry {:?} is not the text of {what} {id:?} (order or digest)",
                    entry.id
                ));
            }
        }
    }
    Ok(format!(
        "{bound} runs bind this sparse fixture ({}) and its model, and each of its {} document and {} query entries encodes its text",
        view.sha256,
        view.documents.len(),
        view.queries.len()
    ))
}

/// Every texts-dependent identity of a view the archive (or full fixture) can confirm: documents and queries
/// in the view's order, query text digests, semantic-text digests (version 2 views).
pub(crate) fn texts_identity(view: &FixtureView, texts: &Texts) -> Outcome {
    let ids: Vec<&str> = texts.documents.iter().map(|(id, _, _)| id.as_str()).collect();
    if ids != view.document_ids.iter().map(String::as_str).collect::<Vec<_>>() {
        return Err("the documents are not the fixture's, in its order".into());
    }
    let texts_by_query: BTreeMap<&str, &str> =
        texts.queries.iter().map(|(id, t)| (id.as_str(), t.as_str())).collect();
    for (id, digest) in &view.query_text_sha256 {
        let text =
            texts_by_query.get(id.as_str()).ok_or_else(|| format!("query {id:?} is not among the texts"))?;
        if crate::canonical::sha256_tagged(text.as_bytes()) != *digest {
            return Err(format!("query {id:?}: its text does not hash to the fixture's digest"));
        }
    }
    if texts.queries.len() != view.query_text_sha256.len() {
        return Err(format!(
            "{} queries, the fixture has {}",
            texts.queries.len(),
            view.query_text_sha256.len()
        ));
    }
    let mut semantic = "";
    if let Some(digests) = &view.semantic_text_sha256 {
        let policy = crate::texts::Policy::of(&view.metadata)?;
        if texts.document_semantic_digests(policy) != digests.documents {
            let at = texts
                .document_semantic_digests(policy)
                .iter()
                .zip(&digests.documents)
                .position(|(a, b)| a != b);
            return Err(format!(
                "document {:?}: its semantic text does not hash to the fixture's digest",
                at.and_then(|i| texts.documents.get(i)).map_or("?", |(id, _, _)| id.as_str())
            ));
        }
        if texts.query_semantic_digests(policy) != digests.queries {
            return Err("a query's semantic text does not hash to the fixture's digest".into());
        }
        semantic = ", and every semantic text (what was embedded) hashes to the fixture's digest";
    }
    Ok(format!(
        "{} documents in the fixture's order and {} queries whose texts hash to the fixture's digests{semantic}",
        texts.documents.len(),
        texts.queries.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sparse fixture whose signer names its checkpoint with a name no published row has fails
    /// `sparse.identity`; a listed name, or none, passes that part.
    #[test]
    fn a_sparse_checkpoint_is_named_only_as_the_registry_names_one() {
        let named = |name: Option<&str>| SparseView {
            sha256: "sha256:00".into(),
            fixture_sha256: "sha256:11".into(),
            model: Value::Null,
            named_by_signer: name.map(str::to_owned),
            documents: Vec::new(),
            queries: Vec::new(),
        };
        assert!(sparse_identity(&named(None), &[], None).is_ok());
        assert!(sparse_identity(&named(Some("naver/splade-v3")), &[], None).is_ok());
        let refused = sparse_identity(&named(Some("naver/splade-v4")), &[], None).unwrap_err();
        assert!(refused.contains("\"naver/splade-v4\", which no published row names"), "{refused}");
    }

    fn view(documents: &[&str]) -> FixtureView {
        FixtureView {
            schema: String::new(),
            fixture_sha256: String::new(),
            metadata: Value::Null,
            query_text_sha256: BTreeMap::new(),
            qrels: BTreeMap::new(),
            document_ids: documents.iter().map(|d| (*d).to_owned()).collect(),
            query_ids: Some(vec!["q".into()]),
            semantic_text_sha256: None,
            vectors: None,
        }
    }

    fn laid_out(mapping: &str) -> Result<Vec<i64>, String> {
        let mapping = Mapping::read(mapping.as_bytes());
        match layout(&view(&["a", "b"]), Input::Read { origin: "mapping.json", content: &mapping }) {
            Ok((fact_ids, query_ids)) => {
                assert_eq!(query_ids, ["q"]);
                Ok(fact_ids)
            }
            Err(Unavailable::Broken(reason) | Unavailable::NotHere(reason)) => Err(reason),
        }
    }

    #[test]
    fn the_layout_takes_each_documents_own_fact_id_in_fixture_order() {
        let entry = |fact: i64, doc: &str| format!(r#"{{"fact_id": {fact}, "doc_id": "{doc}"}}"#);
        let entries = |list: &[String]| format!(r#"{{"entries": [{}]}}"#, list.join(", "));
        assert_eq!(laid_out(&entries(&[entry(7, "a"), entry(3, "b")])), Ok(vec![7, 3]));
        // Two documents under one fact id: every ranking would show one document's id for the other's (the
        // lexical lists give each document its own score, the rows only one of them).
        assert_eq!(
            laid_out(&entries(&[entry(7, "a"), entry(7, "b")])),
            Err("the mapping gives fact id 7 to two documents".to_owned())
        );
        assert_eq!(
            laid_out(&entries(&[entry(3, "b"), entry(7, "a")])),
            Err(r#"mapping entry {"doc_id":"b","fact_id":3} is not document "a" in fixture order"#.to_owned())
        );
        assert_eq!(
            laid_out(&entries(&[entry(7, "a")])),
            Err("the mapping has 1 entries for 2 documents".to_owned())
        );
        assert!(laid_out("{").unwrap_err().starts_with("the mapping: "));
    }
}
