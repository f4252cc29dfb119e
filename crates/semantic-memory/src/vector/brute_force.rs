//! `BruteForce`: the exact vector backend, a scan of one contiguous f32 matrix.

use crate::error::Result;
use crate::store::FactId;
use crate::vector::{ScoredFact, TopK, VectorAnswer, VectorBackend, dot_rows};

/// Exact inner-product search over every stored vector, held row-major in one contiguous buffer.
#[derive(Debug, Clone)]
pub struct BruteForce {
    dims: usize,
    ids: Vec<FactId>,
    matrix: Vec<f32>,
}

impl BruteForce {
    /// An empty index for vectors of `dims` components.
    pub fn new(dims: usize) -> Self {
        BruteForce { dims, ids: Vec::new(), matrix: Vec::new() }
    }

    /// Reserves room for `additional` more vectors.
    pub fn reserve(&mut self, additional: usize) {
        self.ids.reserve(additional);
        self.matrix.reserve(additional * self.dims);
    }

    /// The vector dimension.
    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    /// The fact ids, in row order.
    pub(crate) fn ids(&self) -> &[FactId] {
        &self.ids
    }

    /// The vector of row `row`.
    pub(crate) fn row(&self, row: usize) -> &[f32] {
        &self.matrix[row * self.dims..(row + 1) * self.dims]
    }
}

impl VectorBackend for BruteForce {
    fn name(&self) -> &'static str {
        "brute_force"
    }

    fn is_exact(&self) -> bool {
        true
    }

    fn exactness(&self) -> Option<&'static str> {
        Some("exact: a full scan, every vector in scope scored with the dot product")
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn add(&mut self, fact_id: FactId, vector: &[f32]) -> Result<()> {
        debug_assert_eq!(vector.len(), self.dims);
        self.ids.push(fact_id);
        self.matrix.extend_from_slice(vector);
        Ok(())
    }

    fn search(&self, query: &[f32], k: usize, keep: &dyn Fn(FactId) -> bool) -> Result<VectorAnswer> {
        let mut scores = Vec::new();
        dot_rows(query, &self.matrix, self.dims, &mut scores);
        let mut top = TopK::new(k);
        let mut scanned = 0;
        for (score, fact_id) in scores.iter().zip(&self.ids) {
            if keep(*fact_id) {
                scanned += 1;
                top.offer(ScoredFact { fact_id: *fact_id, score: f64::from(*score) });
            }
        }
        Ok(VectorAnswer { candidates: top.into_sorted(), scanned: Some(scanned), rescored: None })
    }
}
