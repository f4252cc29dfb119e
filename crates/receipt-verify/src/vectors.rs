//! The fixture's vectors as a bundle carries them: binary, no text, so that a verifier can recompute every
//! dense score and every vector candidate list offline.
//!
//! Layout ([`LAYOUT`]): every document vector in `document_ids` order, then every query vector in `query_ids`
//! order, each `dims` IEEE 754 single-precision values, little-endian, nothing else. The file's sha256 is bound
//! in `fixture-metadata.json` and listed in the manifest.
//!
//! A file's document vectors are not held in memory: they stay in the private copy that was hashed (msmarco's
//! are 13.5 GB) and are read from it by position, or block by block for a full scan. Query vectors are few
//! and are held.

use std::borrow::Cow;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::canonical::{hex, sha256_tagged};
use crate::fixture::VectorsBinding;
use crate::found::PrivateCopy;

/// The layout, as `fixture-metadata.json` states it.
pub const LAYOUT: &str = "little-endian IEEE 754 f32, dims values per vector, no header: every document in \
                          document_ids order, then every query in query_ids order";

/// Document and query vectors.
#[derive(Debug, Clone)]
pub struct Vectors {
    dims: usize,
    document_count: usize,
    documents: Documents,
    queries: Vec<f32>,
}

/// Where the document vectors are.
#[derive(Debug, Clone)]
enum Documents {
    Memory(Vec<f32>),
    /// The private copy they were checked in, read by position; its documents come first.
    File(Arc<Held>),
}

#[derive(Debug)]
struct Held {
    file: std::fs::File,
    copy: PrivateCopy,
}

/// Bytes per f32.
const VALUE: usize = 4;
/// Rows read at a time when a copy is first checked.
const BLOCK_ROWS: usize = 1 << 14;

impl Vectors {
    /// Vectors of `dims` dimensions, flat.
    ///
    /// # Errors
    /// Why they are not whole vectors of finite values.
    pub fn new(dims: usize, documents: Vec<f32>, queries: Vec<f32>) -> Result<Vectors, String> {
        if dims == 0 || !documents.len().is_multiple_of(dims) || !queries.len().is_multiple_of(dims) {
            return Err(format!(
                "{} + {} values are not whole vectors of {dims} dimensions",
                documents.len(),
                queries.len()
            ));
        }
        if let Some(at) = documents.iter().chain(&queries).position(|x| !x.is_finite()) {
            return Err(format!("value {at} is not finite"));
        }
        Ok(Vectors {
            dims,
            document_count: documents.len() / dims,
            documents: Documents::Memory(documents),
            queries,
        })
    }

    /// The vectors of a bundle's file, checked in the private copy made as it was hashed: its digest against
    /// the binding, its layout, its size, and every value finite.
    ///
    /// # Errors
    /// The first thing that differs.
    pub(crate) fn from_copy(copy: PrivateCopy, binding: &VectorsBinding) -> Result<Vectors, String> {
        if copy.sha256 != binding.sha256 {
            return Err(format!(
                "{} hashes to {}, fixture-metadata.json binds {}",
                binding.file, copy.sha256, binding.sha256
            ));
        }
        if binding.layout != LAYOUT {
            return Err(format!("layout {:?} is not the one this verifier reads", binding.layout));
        }
        Vectors::in_copy(copy, &binding.file, binding.dims, binding.documents, binding.queries)
    }

    /// The vectors of a file in [`LAYOUT`] holding `documents` and then `queries` vectors of `dims`, checked in
    /// its private copy: its size, and every value finite. `name` names it in errors.
    ///
    /// # Errors
    /// The first thing that differs.
    pub(crate) fn in_copy(
        copy: PrivateCopy,
        name: &str,
        dims: usize,
        documents: usize,
        queries: usize,
    ) -> Result<Vectors, String> {
        let failed = |e: std::io::Error| format!("{name}: {e}");
        let file = std::fs::File::open(&copy.path).map_err(failed)?;
        let size = file.metadata().map_err(failed)?.len();
        let expected = documents
            .checked_add(queries)
            .and_then(|n| n.checked_mul(dims))
            .and_then(|n| n.checked_mul(VALUE))
            .and_then(|n| u64::try_from(n).ok());
        if dims == 0 || expected != Some(size) {
            return Err(format!(
                "{name} is {size} bytes; {documents} documents and {queries} queries of {dims} dimensions are {}",
                expected.map_or_else(|| "beyond counting".to_owned(), |n| format!("{n} bytes"))
            ));
        }
        let mut vectors = Vectors {
            dims,
            document_count: documents,
            documents: Documents::File(Arc::new(Held { file, copy })),
            queries: Vec::new(),
        };
        let not_finite = |at: usize| format!("value {at} is not finite");
        vectors
            .each_block(BLOCK_ROWS, |first, block| match block.iter().position(|x| !x.is_finite()) {
                Some(at) => Err(std::io::Error::other(not_finite(first * dims + at))),
                None => Ok(()),
            })
            .map_err(failed)?;
        if let Documents::File(held) = &vectors.documents {
            let mut bytes = vec![0u8; queries * dims * VALUE];
            held.file.read_exact_at(&mut bytes, (documents * dims * VALUE) as u64).map_err(failed)?;
            decode(&bytes, &mut vectors.queries);
        }
        if let Some(at) = vectors.queries.iter().position(|x| !x.is_finite()) {
            return Err(format!("{name}: {}", not_finite(documents * dims + at)));
        }
        Ok(vectors)
    }

    /// Writes the file's bytes ([`LAYOUT`]) to `out`, returning their `sha256:`.
    ///
    /// # Errors
    /// Reading the copy or writing `out`.
    pub fn write_to(&self, out: &mut dyn Write) -> std::io::Result<String> {
        let mut hasher = Sha256::new();
        let mut bytes = Vec::new();
        let mut put = |values: &[f32]| {
            bytes.clear();
            bytes.extend(values.iter().flat_map(|x| x.to_le_bytes()));
            hasher.update(&bytes);
            out.write_all(&bytes)
        };
        self.each_block(1 << 16, |_, block| put(block))?;
        put(&self.queries)?;
        Ok(format!("sha256:{}", hex(&hasher.finalize())))
    }

    /// `sha256:` of the file's bytes ([`LAYOUT`]).
    ///
    /// # Errors
    /// Reading the copy.
    pub fn sha256(&self) -> std::io::Result<String> {
        match &self.documents {
            Documents::File(held) => Ok(held.copy.sha256.clone()),
            Documents::Memory(_) => self.write_to(&mut std::io::sink()),
        }
    }

    /// Dimensions per vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many documents.
    pub fn document_count(&self) -> usize {
        self.document_count
    }

    /// How many queries.
    pub fn query_count(&self) -> usize {
        self.queries.len() / self.dims
    }

    /// Document `i` (fixture order).
    ///
    /// # Errors
    /// Reading it from the copy (`i` out of range panics, as a slice index does).
    pub fn document(&self, i: usize) -> std::io::Result<Cow<'_, [f32]>> {
        assert!(i < self.document_count, "document {i} of {}", self.document_count);
        match &self.documents {
            Documents::Memory(values) => Ok(Cow::Borrowed(&values[i * self.dims..(i + 1) * self.dims])),
            Documents::File(held) => {
                let mut bytes = vec![0u8; self.dims * VALUE];
                held.file.read_exact_at(&mut bytes, (i * self.dims * VALUE) as u64)?;
                let mut values = Vec::with_capacity(self.dims);
                decode(&bytes, &mut values);
                Ok(Cow::Owned(values))
            }
        }
    }

    /// Query `i` (fixture order).
    pub fn query(&self, i: usize) -> &[f32] {
        &self.queries[i * self.dims..(i + 1) * self.dims]
    }

    /// Calls `visit(first, values)` for every run of up to `rows` consecutive documents in fixture order,
    /// `values` flat: a full scan that never holds more than `rows` document vectors.
    ///
    /// # Errors
    /// Reading the copy, or `visit`'s own.
    pub fn each_block(
        &self,
        rows: usize,
        mut visit: impl FnMut(usize, &[f32]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let rows = rows.max(1);
        match &self.documents {
            Documents::Memory(values) => {
                for (block, values) in values.chunks(rows * self.dims).enumerate() {
                    visit(block * rows, values)?;
                }
            }
            Documents::File(held) => {
                let mut bytes = vec![0u8; rows * self.dims * VALUE];
                let mut values = Vec::with_capacity(rows * self.dims);
                let mut first = 0;
                while first < self.document_count {
                    let count = rows.min(self.document_count - first);
                    let bytes = &mut bytes[..count * self.dims * VALUE];
                    held.file.read_exact_at(bytes, (first * self.dims * VALUE) as u64)?;
                    values.clear();
                    decode(bytes, &mut values);
                    visit(first, &values)?;
                    first += count;
                }
            }
        }
        Ok(())
    }
}

/// Appends the little-endian f32 values of `bytes` to `values`.
fn decode(bytes: &[u8], values: &mut Vec<f32>) {
    values.extend(bytes.chunks_exact(VALUE).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
}

/// The digest a receipt records for a query vector: `sha256:` of its f32 values, little-endian.
pub fn vector_digest(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    sha256_tagged(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_of(bytes: &[u8]) -> (tempfile::TempDir, PrivateCopy) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.f32");
        std::fs::write(&path, bytes).unwrap();
        let copy = PrivateCopy::of(&path, 1 << 20).unwrap();
        (dir, copy)
    }

    fn bytes_of(vectors: &Vectors) -> Vec<u8> {
        let mut bytes = Vec::new();
        vectors.write_to(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn a_copy_reads_against_its_binding_and_nothing_else() {
        let vectors = Vectors::new(2, vec![0.6, 0.8, 1.0, 0.0, 0.0, 1.0], vec![-0.0, 1.0]).unwrap();
        let bytes = bytes_of(&vectors);
        assert_eq!(bytes.len(), 32);
        let binding = VectorsBinding {
            file: "v".into(),
            sha256: sha256_tagged(&bytes),
            dims: 2,
            documents: 3,
            queries: 1,
            layout: LAYOUT.into(),
        };
        assert_eq!(vectors.sha256().unwrap(), binding.sha256);
        let read = Vectors::from_copy(copy_of(&bytes).1, &binding).unwrap();
        assert_eq!((read.document_count(), read.query_count(), read.dims()), (3, 1, 2));
        assert_eq!(read.query(0)[0].to_bits(), (-0.0f32).to_bits());
        assert_eq!(&*read.document(1).unwrap(), &[1.0, 0.0]);
        assert_eq!(bytes_of(&read), bytes, "the file's bytes, again");
        assert_eq!(read.sha256().unwrap(), binding.sha256);
        for rows in [1, 2, 3, 7] {
            let (mut memory, mut file) = (Vec::new(), Vec::new());
            vectors
                .each_block(rows, |first, block| {
                    memory.push((first, block.to_vec()));
                    Ok(())
                })
                .unwrap();
            read.each_block(rows, |first, block| {
                file.push((first, block.to_vec()));
                Ok(())
            })
            .unwrap();
            assert_eq!(memory, file, "blocks of {rows}");
            assert_eq!(file.len(), 3usize.div_ceil(rows));
        }

        let mut flipped = bytes.clone();
        flipped[0] ^= 1;
        assert!(Vectors::from_copy(copy_of(&flipped).1, &binding).unwrap_err().contains("hashes to"));
        let short = &bytes[..bytes.len() - 4];
        let binding_short = VectorsBinding { sha256: sha256_tagged(short), ..binding.clone() };
        let error = Vectors::from_copy(copy_of(short).1, &binding_short).unwrap_err();
        assert!(error.contains("28 bytes") && error.contains("32 bytes"), "{error}");
        let layout = VectorsBinding { layout: "big-endian".into(), ..binding.clone() };
        assert!(Vectors::from_copy(copy_of(&bytes).1, &layout).unwrap_err().contains("layout"));
        let mut nan = bytes.clone();
        nan[28..32].copy_from_slice(&f32::NAN.to_le_bytes());
        let binding_nan = VectorsBinding { sha256: sha256_tagged(&nan), ..binding.clone() };
        let error = Vectors::from_copy(copy_of(&nan).1, &binding_nan).unwrap_err();
        assert!(error.contains("value 7 is not finite"), "{error}");
        assert!(Vectors::new(1, vec![f32::NAN], vec![]).unwrap_err().contains("not finite"));
    }
}
