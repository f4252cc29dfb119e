//! Matryoshka candidates (`SearchConfig::candidate_dims`): the dense search run first over every vector's first
//! d components, renormalised, and the candidates it finds rescored with the full vectors.
//!
//! Both stages are exact, so the answer is a function of the stored vectors that anyone can recompute: the
//! candidates are the exact top `candidate_depth` of [`truncate`]d vectors by [`dot`] (ties by fact id), and
//! the answer is those candidates ranked by the full vectors' [`dot`] (ties by fact id). It is not the full
//! dimension's top k: a fact outside the truncated top `candidate_depth` is never found, which is the point.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::store::FactId;
use crate::vector::{Bounded, ScoredFact, VectorBackend, dot, rank_order};

/// What [`truncate`] does, as receipts state it.
pub const TRUNCATION: &str = "the first candidate_dims components of each stored vector and of the query, divided \
                              by their L2 norm (the sum of squares in index order in f64, its square root, each \
                              component divided in f64 and rounded to f32; an all-zero prefix stays zero)";

/// The first `dims` components of `vector`, at unit length: sentence-transformers' `normalize_embeddings`
/// after `truncate_dim`, in f64 so that the bits follow from the definition ([`TRUNCATION`]) alone.
pub fn truncate(vector: &[f32], dims: usize) -> Vec<f32> {
    let prefix = &vector[..dims.min(vector.len())];
    let norm = prefix.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm == 0.0 {
        return vec![0.0; prefix.len()];
    }
    prefix.iter().map(|x| (f64::from(*x) / norm) as f32).collect()
}

/// The store's vectors truncated to `dims`, in an exact index of their own, with the fact ids of its rows.
#[derive(Debug)]
pub(crate) struct Truncated {
    pub(crate) dims: usize,
    index: Bounded,
}

impl Truncated {
    /// Builds the index from every row of `full` (the store's exact backend).
    ///
    /// # Errors
    /// [`Error::Io`] when rows the exact backend spilled to its temporary file cannot be read.
    pub(crate) fn build(full: &Bounded, dims: usize) -> Result<Truncated> {
        let rows = full.reference();
        let mut index = Bounded::new(dims);
        index.reserve(rows.ids().len());
        let full_dims = rows.dims();
        let mut failed = None;
        rows.rows().each_block(|first, block| {
            for (offset, row) in block.chunks_exact(full_dims).enumerate() {
                if failed.is_none()
                    && let Err(error) = index.add(rows.ids()[first + offset], &truncate(row, dims))
                {
                    failed = Some(error);
                }
            }
        })?;
        match failed {
            Some(error) => Err(error),
            None => Ok(Truncated { dims, index }),
        }
    }
}

/// One Matryoshka search: the candidates, and what each stage did.
pub(crate) struct Answer {
    /// The candidates ranked by the full vectors, at most `limit`.
    pub(crate) candidates: Vec<ScoredFact>,
    /// Rows the first pass bounded, and of those rescored at the truncated dimension.
    pub(crate) scanned: Option<usize>,
    pub(crate) rescored: Option<usize>,
    /// Candidates the first pass returned: each was rescored at full dimension.
    pub(crate) first_pass_returned: usize,
    /// The truncated query's bytes, for the receipt's digest.
    pub(crate) truncated_query: Vec<f32>,
}

/// The two stages over `truncated` and the full rows of `full`: the first pass's top `depth`, rescored, cut to
/// `limit`.
///
/// # Errors
/// [`Error::Io`] reading spilled rows.
pub(crate) fn search(
    truncated: &Arc<Truncated>,
    full: &Bounded,
    query: &[f32],
    depth: usize,
    limit: usize,
    keep: &dyn Fn(FactId) -> bool,
) -> Result<Answer> {
    let truncated_query = truncate(query, truncated.dims);
    let first = truncated.index.search(&truncated_query, depth, keep)?;
    let ids = full.reference().ids();
    // Fact ids are assigned in insertion order, and rows are added in that order: ascending.
    let rows: Vec<usize> = first
        .candidates
        .iter()
        .map(|candidate| {
            ids.binary_search(&candidate.fact_id).map_err(|_| Error::InvalidVector {
                reason: format!("fact {} has no full-dimension row", candidate.fact_id),
            })
        })
        .collect::<Result<_>>()?;
    let mut values = Vec::with_capacity(rows.len() * query.len());
    full.reference().rows().gather(&rows, &mut values)?;
    let mut candidates: Vec<ScoredFact> = first
        .candidates
        .iter()
        .zip(values.chunks_exact(query.len().max(1)))
        .map(|(candidate, row)| ScoredFact { fact_id: candidate.fact_id, score: f64::from(dot(query, row)) })
        .collect();
    candidates.sort_by(rank_order);
    let first_pass_returned = candidates.len();
    candidates.truncate(limit);
    Ok(Answer {
        candidates,
        scanned: first.scanned,
        rescored: first.rescored,
        first_pass_returned,
        truncated_query,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_the_prefix_at_unit_length() {
        let cut = truncate(&[3.0, 4.0, 12.0], 2);
        assert_eq!(cut, vec![0.6, 0.8]);
        assert_eq!(truncate(&[0.0, 0.0, 1.0], 2), vec![0.0, 0.0], "an all-zero prefix stays zero");
    }
}
