//! The fixture's vectors as a bundle carries them: binary, no text, so that a verifier can recompute every
//! dense score and every vector candidate list offline.
//!
//! Layout ([`LAYOUT`]): every document vector in `document_ids` order, then every query vector in `query_ids`
//! order, each `dims` IEEE 754 single-precision values, little-endian, nothing else. The file's sha256 is bound
//! in `fixture-metadata.json` and listed in the manifest.

use crate::canonical::sha256_tagged;
use crate::fixture::VectorsBinding;

/// The layout, as `fixture-metadata.json` states it.
pub const LAYOUT: &str = "little-endian IEEE 754 f32, dims values per vector, no header: every document in \
                          document_ids order, then every query in query_ids order";

/// Document and query vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    dims: usize,
    documents: Vec<f32>,
    queries: Vec<f32>,
}

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
        Ok(Vectors { dims, documents, queries })
    }

    /// Reads the file's bytes against its binding: digest, size, and every value finite.
    ///
    /// # Errors
    /// The first thing that differs.
    pub fn from_bytes(bytes: &[u8], binding: &VectorsBinding) -> Result<Vectors, String> {
        let actual = sha256_tagged(bytes);
        if actual != binding.sha256 {
            return Err(format!(
                "{} hashes to {actual}, fixture-metadata.json binds {}",
                binding.file, binding.sha256
            ));
        }
        if binding.layout != LAYOUT {
            return Err(format!("layout {:?} is not the one this verifier reads", binding.layout));
        }
        let expected =
            (binding.documents + binding.queries).checked_mul(binding.dims).and_then(|n| n.checked_mul(4));
        if expected != Some(bytes.len()) {
            return Err(format!(
                "{} is {} bytes; {} documents and {} queries of {} dimensions are {expected:?}",
                binding.file,
                bytes.len(),
                binding.documents,
                binding.queries,
                binding.dims
            ));
        }
        let values: Vec<f32> =
            bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let split = binding.documents * binding.dims;
        Vectors::new(binding.dims, values[..split].to_vec(), values[split..].to_vec())
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.documents.iter().chain(&self.queries).flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Dimensions per vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many documents.
    pub fn document_count(&self) -> usize {
        self.documents.len() / self.dims
    }

    /// How many queries.
    pub fn query_count(&self) -> usize {
        self.queries.len() / self.dims
    }

    /// Document `i` (fixture order).
    pub fn document(&self, i: usize) -> &[f32] {
        &self.documents[i * self.dims..(i + 1) * self.dims]
    }

    /// Query `i` (fixture order).
    pub fn query(&self, i: usize) -> &[f32] {
        &self.queries[i * self.dims..(i + 1) * self.dims]
    }

    /// Every document vector, flat, in fixture order.
    pub fn documents(&self) -> &[f32] {
        &self.documents
    }
}

/// The digest a receipt records for a query vector: `sha256:` of its f32 values, little-endian.
pub fn vector_digest(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    sha256_tagged(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_against_their_binding_and_nothing_else() {
        let vectors = Vectors::new(2, vec![0.6, 0.8, 1.0, 0.0], vec![-0.0, 1.0]).unwrap();
        let bytes = vectors.to_bytes();
        let binding = VectorsBinding {
            file: "v".into(),
            sha256: sha256_tagged(&bytes),
            dims: 2,
            documents: 2,
            queries: 1,
            layout: LAYOUT.into(),
        };
        let read = Vectors::from_bytes(&bytes, &binding).unwrap();
        assert_eq!(read, vectors);
        assert_eq!(read.query(0)[0].to_bits(), (-0.0f32).to_bits());
        assert_eq!(read.document(1), &[1.0, 0.0]);
        let mut flipped = bytes.clone();
        flipped[0] ^= 1;
        assert!(Vectors::from_bytes(&flipped, &binding).unwrap_err().contains("hashes to"));
        let short = &bytes[..bytes.len() - 4];
        let binding_short = VectorsBinding { sha256: sha256_tagged(short), ..binding.clone() };
        assert!(Vectors::from_bytes(short, &binding_short).unwrap_err().contains("bytes"));
        let nan = Vectors::new(1, vec![f32::NAN], vec![]).unwrap_err();
        assert!(nan.contains("not finite"), "{nan}");
    }
}
