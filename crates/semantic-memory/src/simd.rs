//! A cap on the instruction sets the search kernels use, so that one machine can measure the code another kind
//! of machine runs (an AVX2-only EPYC's first pass on an AVX-512 one). Results never depend on it: every
//! kernel gives the same bits (tested); only speed does.

/// The environment variable that caps the kernels: `avx512` (no cap), `avx2` or `portable`. The embedding
/// crate reads the same variable for the forward pass.
pub const SIMD_CAP_VAR: &str = "SCIFACT_AUDIT_SIMD";

/// The widest instruction set the kernels may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SimdCap {
    /// Plain Rust only.
    Portable,
    /// Up to AVX2 with FMA.
    Avx2,
    /// Whatever the CPU has (AVX-512 and its VNNI included).
    Avx512,
}

impl SimdCap {
    /// The cap a value of [`SIMD_CAP_VAR`] names, if it names one.
    pub fn parse(value: &str) -> Option<SimdCap> {
        match value.trim().to_ascii_lowercase().as_str() {
            "avx512" => Some(SimdCap::Avx512),
            "avx2" => Some(SimdCap::Avx2),
            "portable" => Some(SimdCap::Portable),
            _ => None,
        }
    }

    /// The value of [`SIMD_CAP_VAR`] that names this cap: [`SimdCap::parse`]'s inverse.
    pub fn name(self) -> &'static str {
        match self {
            SimdCap::Avx512 => "avx512",
            SimdCap::Avx2 => "avx2",
            SimdCap::Portable => "portable",
        }
    }

    /// The cap [`SIMD_CAP_VAR`] sets: `None` when unset.
    ///
    /// # Errors
    /// The variable's value, when it names no cap (kernels then run uncapped; a binary should refuse it).
    pub fn from_env() -> Result<Option<SimdCap>, String> {
        match std::env::var(SIMD_CAP_VAR) {
            Err(std::env::VarError::NotPresent) => Ok(None),
            Ok(value) => SimdCap::parse(&value).map(Some).ok_or(value),
            Err(std::env::VarError::NotUnicode(value)) => Err(value.to_string_lossy().into_owned()),
        }
    }
}

/// The cap the environment sets now (none: [`SimdCap::Avx512`]); the kernels' choice reads it once.
pub(crate) fn cap() -> SimdCap {
    SimdCap::from_env().ok().flatten().unwrap_or(SimdCap::Avx512)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_parse_and_order() {
        assert_eq!(SimdCap::parse("AVX2"), Some(SimdCap::Avx2));
        assert_eq!(SimdCap::parse(" portable\n"), Some(SimdCap::Portable));
        assert_eq!(SimdCap::parse("avx512"), Some(SimdCap::Avx512));
        assert_eq!(SimdCap::parse("sse2"), None);
        assert!(SimdCap::Portable < SimdCap::Avx2 && SimdCap::Avx2 < SimdCap::Avx512);
        for cap in [SimdCap::Portable, SimdCap::Avx2, SimdCap::Avx512] {
            assert_eq!(SimdCap::parse(cap.name()), Some(cap));
        }
    }
}
