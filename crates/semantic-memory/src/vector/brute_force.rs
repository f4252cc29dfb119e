//! `BruteForce`: the exact vector backend, a scan of every stored row.

use crate::error::Result;
use crate::store::FactId;
use crate::vector::rows::Rows;
use crate::vector::{ScoredFact, TopK, VectorAnswer, VectorBackend, dot_rows};

/// Exact inner-product search over every stored vector, held row-major: in memory up to a budget, beyond it in
/// a temporary file read back in blocks.
#[derive(Debug)]
pub struct BruteForce {
    dims: usize,
    ids: Vec<FactId>,
    rows: Rows,
}

impl BruteForce {
    /// An empty index for vectors of `dims` components, every row held in memory.
    pub fn new(dims: usize) -> Self {
        BruteForce::with_rows_in_memory(dims, usize::MAX)
    }

    /// An empty index for vectors of `dims` components that holds at most about `bytes` of rows in memory and
    /// appends the rest to a temporary file.
    pub fn with_rows_in_memory(dims: usize, bytes: usize) -> Self {
        BruteForce { dims, ids: Vec::new(), rows: Rows::new(dims, bytes) }
    }

    /// Reserves room for `additional` more vectors.
    pub fn reserve(&mut self, additional: usize) {
        self.ids.reserve(additional);
        self.rows.reserve(additional);
    }

    /// How many rows live in the temporary file rather than in memory.
    pub fn rows_on_disk(&self) -> usize {
        self.rows.spilled()
    }

    /// The vector dimension.
    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    /// The fact ids, in row order.
    pub(crate) fn ids(&self) -> &[FactId] {
        &self.ids
    }

    /// The rows.
    pub(crate) fn rows(&self) -> &Rows {
        &self.rows
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
        self.rows.push(vector)?;
        self.ids.push(fact_id);
        Ok(())
    }

    fn search(&self, query: &[f32], k: usize, keep: &dyn Fn(FactId) -> bool) -> Result<VectorAnswer> {
        let mut scores = Vec::new();
        let mut top = TopK::new(k);
        let mut scanned = 0;
        self.rows.each_block(|first, block| {
            dot_rows(query, block, self.dims, &mut scores);
            for (score, fact_id) in scores.iter().zip(&self.ids[first..]) {
                if keep(*fact_id) {
                    scanned += 1;
                    top.offer(ScoredFact { fact_id: *fact_id, score: f64::from(*score) });
                }
            }
        })?;
        Ok(VectorAnswer { candidates: top.into_sorted(), scanned: Some(scanned), rescored: None })
    }
}
