//! `Rows`: an exact index's f32 rows, held in memory up to a budget and beyond it in a temporary file.
//!
//! The bound's first pass reads only the int8 codes; the f32 rows are read for the rows it cannot rule out,
//! and by the full scan. At msmarco's 8.8 M documents of 384 dimensions they are 13.5 GB, so once the rows
//! held reach the budget they are appended to an unlinked temporary file (a crash leaves nothing behind) and
//! read back by position: the page cache keeps what fits, the process holds at most the budget. The values
//! read are the values written, so every score keeps its bits wherever its row lives.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};
use crate::store::{extend_from_blob, vector_to_blob};

/// The rows an exact index holds in memory by default before it appends them to a temporary file: 1 GiB.
pub const DEFAULT_ROWS_IN_MEMORY: usize = 1 << 30;

/// Bytes read from the file per block of a scan, and written per write: 4 MiB.
const SCAN_BYTES: usize = 4 << 20;

/// Row-major f32 rows of one dimension: the first `spilled` in the file, the rest in memory.
#[derive(Debug)]
pub(crate) struct Rows {
    dims: usize,
    /// Values held before they are appended to the file (at least one row's).
    budget: usize,
    held: Vec<f32>,
    spilled: usize,
    file: Option<File>,
}

impl Rows {
    /// No rows yet, of `dims` components, at most about `budget_bytes` of them in memory.
    pub(crate) fn new(dims: usize, budget_bytes: usize) -> Self {
        let budget = (budget_bytes / 4).max(dims.max(1));
        Rows { dims, budget, held: Vec::new(), spilled: 0, file: None }
    }

    /// How many rows there are.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.spilled + self.held.len() / self.dims.max(1)
    }

    /// How many rows live in the temporary file.
    pub(crate) fn spilled(&self) -> usize {
        self.spilled
    }

    /// Reserves memory for `additional` more rows, up to the budget.
    pub(crate) fn reserve(&mut self, additional: usize) {
        let wanted = additional.saturating_mul(self.dims).min(self.budget.saturating_sub(self.held.len()));
        self.held.reserve(wanted);
    }

    /// Appends `row` (of `dims` values); when the rows held reach the budget they move to the file.
    pub(crate) fn push(&mut self, row: &[f32]) -> Result<()> {
        debug_assert_eq!(row.len(), self.dims);
        self.held.extend_from_slice(row);
        if self.held.len() + self.dims > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        let mut offset = self.byte_offset(self.spilled);
        let file: &File = match self.file {
            Some(ref file) => file,
            None => self.file.insert(tempfile::tempfile().map_err(temp_error)?),
        };
        for values in self.held.chunks(SCAN_BYTES / 4) {
            let bytes = vector_to_blob(values);
            file.write_all_at(&bytes, offset).map_err(temp_error)?;
            offset += bytes.len() as u64;
        }
        self.spilled += self.held.len() / self.dims.max(1);
        self.held.clear();
        Ok(())
    }

    fn byte_offset(&self, row: usize) -> u64 {
        (row as u64) * (self.dims as u64) * 4
    }

    /// Appends to `out` the values of `rows` (each below [`Rows::len`]), in the order given; consecutive rows
    /// in the file are read at once.
    pub(crate) fn gather(&self, rows: &[usize], out: &mut Vec<f32>) -> Result<()> {
        let dims = self.dims;
        let mut at = 0;
        while at < rows.len() {
            let row = rows[at];
            if row >= self.spilled {
                let start = (row - self.spilled) * dims;
                out.extend_from_slice(&self.held[start..start + dims]);
                at += 1;
                continue;
            }
            let mut run = 1;
            while at + run < rows.len() && rows[at + run] == row + run && row + run < self.spilled {
                run += 1;
            }
            self.read_spilled(row, run, out)?;
            at += run;
        }
        Ok(())
    }

    /// Appends `count` spilled rows from `first` to `out`.
    fn read_spilled(&self, first: usize, count: usize, out: &mut Vec<f32>) -> Result<()> {
        let Some(file) = &self.file else {
            return Err(temp_error(std::io::Error::other("rows were spilled but no file holds them")));
        };
        let mut bytes = vec![0u8; count * self.dims * 4];
        file.read_exact_at(&mut bytes, self.byte_offset(first)).map_err(temp_error)?;
        extend_from_blob(out, &bytes);
        Ok(())
    }

    /// Calls `visit(first_row, values)` on every row in order, in blocks of whole rows.
    pub(crate) fn each_block(&self, mut visit: impl FnMut(usize, &[f32])) -> Result<()> {
        let per_block = (SCAN_BYTES / (self.dims.max(1) * 4)).max(1);
        let mut block = Vec::new();
        let mut first = 0;
        while first < self.spilled {
            let count = per_block.min(self.spilled - first);
            block.clear();
            self.read_spilled(first, count, &mut block)?;
            visit(first, &block);
            first += count;
        }
        if !self.held.is_empty() {
            visit(self.spilled, &self.held);
        }
        Ok(())
    }
}

fn temp_error(source: std::io::Error) -> Error {
    Error::Io { path: std::env::temp_dir(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seed: usize, dims: usize) -> Vec<f32> {
        (0..dims).map(|d| ((seed * 31 + d * 7) % 97) as f32 / 97.0 - 0.5).collect()
    }

    #[test]
    fn spilled_rows_read_back_as_written_in_any_order_and_in_blocks() {
        let dims = 5;
        for budget_rows in [1, 2, 3, 7, 100] {
            let mut rows = Rows::new(dims, budget_rows * dims * 4);
            let written: Vec<Vec<f32>> = (0..23).map(|seed| row(seed, dims)).collect();
            for values in &written {
                rows.push(values).unwrap();
            }
            assert_eq!(rows.len(), 23);
            if budget_rows < 23 {
                assert!(rows.spilled() > 0, "budget {budget_rows}: nothing spilled");
            } else {
                assert_eq!(rows.spilled(), 0);
            }
            let asked = [22, 0, 1, 2, 5, 6, 7, 21, 3, 3, 12];
            let mut got = Vec::new();
            rows.gather(&asked, &mut got).unwrap();
            let expected: Vec<f32> = asked.iter().flat_map(|&r| written[r].clone()).collect();
            assert_eq!(got, expected, "budget {budget_rows}");
            let mut scanned = Vec::new();
            rows.each_block(|first, values| {
                assert_eq!(first * dims, scanned.len());
                scanned.extend_from_slice(values);
            })
            .unwrap();
            assert_eq!(scanned, written.concat(), "budget {budget_rows}");
        }
    }
}
